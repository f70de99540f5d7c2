//! A small seeded generator and mutator. No coverage feedback: every input is a pure function
//! of (target, seed, iteration), so any failure is reproduced from those three numbers.

/// The engine's SplitMix64: tiny, fast, and good enough to pick mutations.
#[derive(Debug, Clone)]
pub struct Rng(lakefish_engine::random_games::SplitMix);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(lakefish_engine::random_games::SplitMix(seed))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    pub fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// Small lengths far more often than large ones.
    pub fn small_len(&mut self, max: usize) -> usize {
        let cap = 1usize << self.below(usize::BITS as usize - 1).min(12);
        1 + self.below(cap.min(max.max(1)))
    }
}

/// FNV-1a, to derive a per-target stream from the run's seed.
pub fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

const INTERESTING_U8: [u8; 12] = [
    0, 1, 0x7f, 0x80, 0xff, b'\n', b' ', b'[', b']', b'"', b'{', 0xc3,
];
const INTERESTING_U32: [u32; 12] = [
    0,
    1,
    2,
    7,
    8,
    0x7f,
    0xff,
    0xffff,
    0x1_0000,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
];
/// Numbers as text, for token mutations: limits of every integer type a parser may use.
pub const INTERESTING_NUMBERS: [&str; 16] = [
    "0",
    "-0",
    "1",
    "-1",
    "127",
    "256",
    "65536",
    "2147483647",
    "-2147483648",
    "4294967296",
    "9223372036854775807",
    "18446744073709551616",
    "99999999999999999999999",
    "1e308",
    "NaN",
    "0.1",
];

/// One byte-level mutation of `data` (bit flips, interesting values, insertions, deletions,
/// duplication, splicing from `others`, truncation, dictionary tokens).
pub fn mutate_bytes(rng: &mut Rng, data: &mut Vec<u8>, others: &[Vec<u8>], dict: &[Vec<u8>]) {
    let len = data.len();
    match rng.below(12) {
        0 if len > 0 => {
            let i = rng.below(len);
            data[i] ^= 1 << rng.below(8);
        }
        1 if len > 0 => {
            let i = rng.below(len);
            data[i] = rng.next_u64() as u8;
        }
        2 if len > 0 => {
            let i = rng.below(len);
            data[i] = *rng.pick(&INTERESTING_U8);
        }
        3 if len >= 4 => {
            let v = *rng.pick(&INTERESTING_U32);
            let v = if rng.chance(2) { v } else { v.wrapping_neg() };
            let bytes = if rng.chance(2) {
                v.to_le_bytes()
            } else {
                v.to_be_bytes()
            };
            let width = *rng.pick(&[1usize, 2, 4]);
            let i = rng.below(len - width + 1);
            data[i..i + width].copy_from_slice(&bytes[..width]);
        }
        4 => {
            let n = rng.small_len(64);
            let at = rng.below(len + 1);
            let fill: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
            data.splice(at..at, fill);
        }
        5 if len > 0 => {
            let at = rng.below(len);
            let n = rng.small_len(len - at);
            data.drain(at..at + n);
        }
        6 if len > 0 => {
            let at = rng.below(len);
            let n = rng.small_len(len - at);
            let copy = data[at..at + n].to_vec();
            let to = rng.below(len + 1);
            data.splice(to..to, copy);
        }
        7 if !others.is_empty() => {
            let other = rng.pick(others);
            if !other.is_empty() {
                let at = rng.below(other.len());
                let n = rng.small_len(other.len() - at);
                let piece = other[at..at + n].to_vec();
                let to = rng.below(len + 1);
                if rng.chance(2) {
                    data.splice(to..to, piece);
                } else {
                    let end = (to + n).min(len);
                    data.splice(to..end, piece);
                }
            }
        }
        8 if len > 0 => data.truncate(rng.below(len)),
        9 if !dict.is_empty() => {
            let token = rng.pick(dict).clone();
            let at = rng.below(len + 1);
            if rng.chance(2) || at == len {
                data.splice(at..at, token);
            } else {
                let end = (at + token.len()).min(len);
                data.splice(at..end, token);
            }
        }
        10 if len > 0 => {
            let i = rng.below(len);
            data[i] = data[i].wrapping_add(rng.below(7) as u8).wrapping_sub(3);
        }
        _ => {
            // A run of one repeated byte: long lines, deep nesting, many separators.
            let n = rng.small_len(4096);
            let b = if rng.chance(2) {
                *rng.pick(&INTERESTING_U8)
            } else {
                rng.next_u64() as u8
            };
            let at = rng.below(len + 1);
            data.splice(at..at, std::iter::repeat_n(b, n));
        }
    }
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'#' | b'%' | b'.' | b'-' | b'+')
}

/// Splits text into alternating word and separator runs (concatenated, they give it back).
fn tokens(data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..=data.len() {
        if i == data.len() || is_word(data[i]) != is_word(data[i - 1]) {
            out.push(&data[start..i]);
            start = i;
        }
    }
    out
}

/// One token- or line-level mutation for text formats: words replaced by dictionary words,
/// limit numbers or words of other seeds; words and lines deleted, duplicated, swapped.
pub fn mutate_text(rng: &mut Rng, data: &mut Vec<u8>, others: &[Vec<u8>], dict: &[Vec<u8>]) {
    if rng.chance(4) {
        return mutate_lines(rng, data, others);
    }
    let toks = tokens(data);
    let words: Vec<usize> = (0..toks.len()).filter(|&i| is_word(toks[i][0])).collect();
    let mut out: Vec<Vec<u8>> = toks.iter().map(|t| t.to_vec()).collect();
    let replacement = |rng: &mut Rng| -> Vec<u8> {
        match rng.below(3) {
            0 if !dict.is_empty() => rng.pick(dict).clone(),
            1 if !others.is_empty() => {
                let other = tokens(&others[rng.below(others.len())]);
                let w: Vec<&[u8]> = other.into_iter().filter(|t| is_word(t[0])).collect();
                if w.is_empty() {
                    b"x".to_vec()
                } else {
                    rng.pick(&w).to_vec()
                }
            }
            _ => rng.pick(&INTERESTING_NUMBERS).as_bytes().to_vec(),
        }
    };
    if words.is_empty() {
        let r = replacement(rng);
        data.extend_from_slice(&r);
        return;
    }
    let w = *rng.pick(&words);
    match rng.below(6) {
        0 | 1 => out[w] = replacement(rng),
        2 => out[w].clear(),
        3 => {
            let copy = out[w].clone();
            out.insert(w, b" ".to_vec());
            out.insert(w, copy);
        }
        4 => {
            let v = *rng.pick(&words);
            out.swap(w, v);
        }
        _ => {
            let r = replacement(rng);
            out.insert(w, b" ".to_vec());
            out.insert(w, r);
        }
    }
    *data = out.concat();
}

fn mutate_lines(rng: &mut Rng, data: &mut Vec<u8>, others: &[Vec<u8>]) {
    let mut lines: Vec<Vec<u8>> = data.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
    let i = rng.below(lines.len());
    match rng.below(4) {
        0 => {
            lines.remove(i);
        }
        1 => {
            let copy = lines[i].clone();
            lines.insert(i, copy);
        }
        2 => {
            let j = rng.below(lines.len());
            lines.swap(i, j);
        }
        _ => {
            if !others.is_empty() {
                let other: Vec<&[u8]> = rng.pick(others).split(|&b| b == b'\n').collect();
                let line = rng.pick(&other).to_vec();
                lines.insert(i, line);
            }
        }
    }
    *data = lines.join(&b'\n');
}

/// Random bytes, sometimes printable, for inputs built from nothing.
pub fn random_bytes(rng: &mut Rng, max: usize) -> Vec<u8> {
    let n = rng.below(max + 1);
    let printable = rng.chance(2);
    (0..n)
        .map(|_| {
            let b = rng.next_u64() as u8;
            if printable { 0x20 + b % 0x5f } else { b }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_reassemble_the_text() {
        let text = b"[Event \"x\"]\n1. e4 {[%eval 0.3]} e5 *";
        assert_eq!(tokens(text).concat(), text.to_vec());
    }

    #[test]
    fn mutations_are_deterministic() {
        let run = || {
            let mut rng = Rng::new(7);
            let mut d = b"position startpos moves e2e4".to_vec();
            for _ in 0..50 {
                mutate_bytes(
                    &mut rng,
                    &mut d,
                    &[b"go depth 3".to_vec()],
                    &[b"fen".to_vec()],
                );
                mutate_text(
                    &mut rng,
                    &mut d,
                    &[b"go depth 3".to_vec()],
                    &[b"fen".to_vec()],
                );
            }
            d
        };
        assert_eq!(run(), run());
    }
}
