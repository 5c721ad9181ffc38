//! Inputs for a target: arbitrary bytes, or a seed mutated a few times. Mutations of valid
//! inputs reach the deep paths of a decoder; arbitrary bytes its front door.

use proptest::prelude::*;

/// Largest arbitrary input: decoders must also refuse what is merely long.
const MAX_ARBITRARY: usize = 4 * 1024;
/// Most edits applied to one seed.
const MAX_EDITS: usize = 8;

/// One edit of a seed.
#[derive(Debug, Clone)]
enum Edit {
    /// Replaces the byte at a position.
    Set(usize, u8),
    /// Flips one bit at a position.
    Flip(usize, u8),
    /// Inserts a byte.
    Insert(usize, u8),
    /// Removes a run of bytes.
    Remove(usize, usize),
    /// Cuts the input at a position.
    Truncate(usize),
    /// Repeats a run of bytes at another position (grows lengths and nesting).
    Duplicate(usize, usize, usize),
    /// Writes an interesting byte sequence (boundary numbers, quotes, escapes) at a position.
    Splice(usize, usize),
}

/// Byte sequences decoders tend to treat specially.
const INTERESTING: &[&[u8]] = &[
    b"\"",
    b"\\",
    b"\\u0000",
    b"\\ud800",
    b"{",
    b"}",
    b"[",
    b"]",
    b"-0",
    b"1e400",
    b"-9223372036854775809",
    b"18446744073709551616",
    b"NaN",
    b"null",
    b"\xff\xff\xff\xff\x0f",
    b"\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01",
    b"\x00",
    b"\xf0\x9f\x98\x80",
    b"\xed\xa0\x80",
    b"\r\n",
    b"data: ",
    b"=",
    b".",
];

fn edit() -> impl Strategy<Value = Edit> {
    let pos = any::<usize>();
    prop_oneof![
        (pos, any::<u8>()).prop_map(|(p, b)| Edit::Set(p, b)),
        (pos, 0u8..8).prop_map(|(p, bit)| Edit::Flip(p, bit)),
        (pos, any::<u8>()).prop_map(|(p, b)| Edit::Insert(p, b)),
        (pos, 1usize..16).prop_map(|(p, n)| Edit::Remove(p, n)),
        pos.prop_map(Edit::Truncate),
        (pos, 1usize..64, pos).prop_map(|(p, n, at)| Edit::Duplicate(p, n, at)),
        (pos, 0..INTERESTING.len()).prop_map(|(p, i)| Edit::Splice(p, i)),
    ]
}

fn apply(mut bytes: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
    for edit in edits {
        let len = bytes.len();
        let at = |p: usize| if len == 0 { 0 } else { p % (len + 1) };
        match *edit {
            Edit::Set(p, b) if len > 0 => bytes[p % len] = b,
            Edit::Flip(p, bit) if len > 0 => bytes[p % len] ^= 1 << bit,
            Edit::Insert(p, b) => bytes.insert(at(p), b),
            Edit::Remove(p, n) if len > 0 => {
                let start = p % len;
                let end = (start + n).min(len);
                bytes.drain(start..end);
            }
            Edit::Truncate(p) => bytes.truncate(at(p)),
            Edit::Duplicate(p, n, to) if len > 0 => {
                let start = p % len;
                let run: Vec<u8> = bytes[start..(start + n).min(len)].to_vec();
                let to = at(to);
                bytes.splice(to..to, run);
            }
            Edit::Splice(p, i) => {
                let to = at(p);
                bytes.splice(to..to, INTERESTING[i].iter().copied());
            }
            Edit::Set(..) | Edit::Flip(..) | Edit::Remove(..) | Edit::Duplicate(..) => {}
        }
    }
    bytes
}

/// Arbitrary bytes, a seed as it is, or a seed with up to a few edits.
pub fn bytes_or_mutation(seeds: Vec<Vec<u8>>) -> BoxedStrategy<Vec<u8>> {
    let arbitrary = proptest::collection::vec(any::<u8>(), 0..MAX_ARBITRARY);
    if seeds.is_empty() {
        return arbitrary.boxed();
    }
    let count = seeds.len();
    let mutated = (0..count, proptest::collection::vec(edit(), 0..MAX_EDITS))
        .prop_map(move |(i, edits)| apply(seeds[i].clone(), &edits));
    prop_oneof![1 => arbitrary, 4 => mutated].boxed()
}

/// [`bytes_or_mutation`] as text (invalid UTF-8 replaced), for decoders that take `&str`.
pub fn text_or_mutation(seeds: Vec<Vec<u8>>) -> BoxedStrategy<String> {
    let text = proptest::string::string_regex("(?s).{0,512}")
        .map(Strategy::boxed)
        .unwrap_or_else(|_| Just(String::new()).boxed());
    let mutated =
        bytes_or_mutation(seeds).prop_map(|bytes| String::from_utf8_lossy(&bytes).into_owned());
    prop_oneof![1 => text, 4 => mutated].boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits_stay_in_bounds_on_any_input() {
        let edits = [
            Edit::Set(7, 1),
            Edit::Remove(3, 100),
            Edit::Duplicate(0, 63, 9),
            Edit::Truncate(1),
            Edit::Splice(5, 0),
            Edit::Flip(2, 7),
        ];
        assert_eq!(apply(Vec::new(), &[Edit::Set(3, 1)]), Vec::<u8>::new());
        let out = apply(b"abcdef".to_vec(), &edits);
        assert!(out.len() <= 6 + 64 + 8);
    }
}
