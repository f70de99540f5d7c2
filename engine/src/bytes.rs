//! Reading little-endian net files: one cursor for both formats (lakefish's `.nnue` and
//! Stockfish's), so running off the end is found the same way and reported with what was
//! being read.

/// A read that needed more bytes than the file has left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Short {
    pub what: String,
    pub offset: usize,
    pub needed: usize,
    pub have: usize,
}

/// A cursor over a file's bytes.
pub struct ByteReader<'a> {
    bytes: &'a [u8],
    /// Bytes read so far.
    pub at: usize,
}

impl<'a> ByteReader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        ByteReader { bytes, at: 0 }
    }

    /// The next `n` bytes; `what` names them when the file is shorter.
    pub fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], Short> {
        let Some(end) = self.at.checked_add(n).filter(|&e| e <= self.bytes.len()) else {
            return Err(Short {
                what: what.to_string(),
                offset: self.at,
                needed: n,
                have: self.bytes.len(),
            });
        };
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    pub fn u32(&mut self, what: &str) -> Result<u32, Short> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }
}
