//! `lakefish du` (issue 45): the lake's space by kind and item agrees with a walk of the
//! directory the lake lives in.

use lakefish_ingest::binpack::synthetic_binpack;
use lakefish_jobs::space::{SpaceKind, usage};
use lakefish_schemas::{DatasetName, JobId, MaskDefinition, MaskSpec, Source};

mod common;
use common::LakeFixture;

#[test]
fn space_by_kind_and_item_agrees_with_the_files() {
    let fx = LakeFixture::new();
    fx.ingest_bytes(&synthetic_binpack(40, 1), "a", 1_000);
    fx.ingest_bytes(&synthetic_binpack(80, 2), "b", 1_000);
    let spec = MaskSpec {
        dataset: DatasetName::new("b").unwrap(),
        source: Source::Binpack,
        definition: MaskDefinition::quiet(),
    };
    lakefish_jobs::masks::mask_dataset(&fx.ctx(), &JobId::new(), &spec).unwrap();
    let u = fx.rt.block_on(usage(&fx.lake)).unwrap();

    // Every file of the lake (job records included), walked here.
    let root = fx.path("");
    let mut files: Vec<(String, u64)> = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if !p.to_string_lossy().contains('#') {
                let key = p.strip_prefix(&root).unwrap().display().to_string();
                files.push((key, std::fs::metadata(&p).unwrap().len()));
            }
        }
    }
    assert_eq!(u.objects as usize, files.len());
    assert_eq!(u.bytes, files.iter().map(|(_, n)| n).sum::<u64>());
    let of = |prefix: &str| -> u64 {
        files
            .iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .map(|(_, n)| n)
            .sum()
    };
    let kind = |k: SpaceKind| u.kinds.iter().find(|t| t.kind == k).unwrap().clone();
    assert_eq!(kind(SpaceKind::Datasets).bytes, of("positions/"));
    assert_eq!(kind(SpaceKind::Datasets).items, 2);
    assert_eq!(kind(SpaceKind::Masks).bytes, of("masks/"));
    let b = u.items.iter().find(|i| i.name == "binpack/b").unwrap();
    assert_eq!(b.bytes, of("positions/source=binpack/dataset=b/"));
    assert!(
        b.bytes
            > u.items
                .iter()
                .find(|i| i.name == "binpack/a")
                .unwrap()
                .bytes
    );
    assert!(
        u.items.windows(2).all(|w| w[0].bytes >= w[1].bytes),
        "largest first"
    );
}
