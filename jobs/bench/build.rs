// Binaries and tests of this crate find libtorch at run time without LD_LIBRARY_PATH: the
// directory torch-sys linked against goes into their rpath.
fn main() {
    if let Ok(dir) = std::env::var("DEP_TCH_LIBTORCH_LIB") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
