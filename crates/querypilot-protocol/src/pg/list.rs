//! Zero-copy views of the repeated fields inside messages: Int16 format codes, OIDs, length-
//! prefixed values (parameters, columns) and NUL-terminated string lists.
//!
//! A view is only built by a decoder after it validated the whole list, so iterating never fails;
//! the iterators still use checked reads and simply stop if the invariant were ever broken.
//! Encoding a decoded view copies its wire bytes verbatim.

use super::error::DecodeError;
use super::wire::Reader;

/// A validated list of Int16 values (format codes: 0 text, 1 binary).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Int16List<'a> {
    count: u16,
    raw: &'a [u8],
}

impl<'a> Int16List<'a> {
    /// Reads an Int16 count and that many Int16 values.
    pub(crate) fn read(r: &mut Reader<'a>, what: &'static str) -> Result<Self, DecodeError> {
        let count = r.u16(what)?;
        let raw = r.bytes(usize::from(count) * 2, what)?;
        Ok(Self { count, raw })
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        usize::from(self.count)
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The wire bytes of the values (without the count).
    pub fn raw(&self) -> &'a [u8] {
        self.raw
    }

    /// Iterates the values.
    pub fn iter(&self) -> impl Iterator<Item = i16> + 'a {
        self.raw.chunks_exact(2).filter_map(|c| <[u8; 2]>::try_from(c).ok().map(i16::from_be_bytes))
    }
}

/// A validated list of Int32 object identifiers (parameter and column types).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OidList<'a> {
    count: u16,
    raw: &'a [u8],
}

impl<'a> OidList<'a> {
    /// Reads an Int16 count and that many Int32 OIDs.
    pub(crate) fn read(r: &mut Reader<'a>, what: &'static str) -> Result<Self, DecodeError> {
        let count = r.u16(what)?;
        let raw = r.bytes(usize::from(count) * 4, what)?;
        Ok(Self { count, raw })
    }

    /// Number of OIDs.
    pub fn len(&self) -> usize {
        usize::from(self.count)
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The wire bytes of the OIDs (without the count).
    pub fn raw(&self) -> &'a [u8] {
        self.raw
    }

    /// Iterates the OIDs.
    pub fn iter(&self) -> impl Iterator<Item = u32> + 'a {
        self.raw.chunks_exact(4).filter_map(|c| <[u8; 4]>::try_from(c).ok().map(u32::from_be_bytes))
    }
}

/// A validated list of Int32-length-prefixed values where length -1 is SQL NULL
/// (Bind parameters, DataRow columns, FunctionCall arguments).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ValueList<'a> {
    count: u16,
    raw: &'a [u8],
}

impl<'a> ValueList<'a> {
    /// Reads an Int16 count and that many values, validating every length.
    pub(crate) fn read(r: &mut Reader<'a>, what: &'static str) -> Result<Self, DecodeError> {
        let count = r.u16(what)?;
        let before = r.clone();
        for _ in 0..count {
            r.value(what)?;
        }
        let used = before.remaining().saturating_sub(r.remaining());
        let raw = before.clone().bytes(used, what)?;
        Ok(Self { count, raw })
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        usize::from(self.count)
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The wire bytes of the values (without the count).
    pub fn raw(&self) -> &'a [u8] {
        self.raw
    }

    /// Iterates the values; `None` is SQL NULL.
    pub fn iter(&self) -> ValueIter<'a> {
        ValueIter { r: Reader::new(self.raw), left: self.count }
    }
}

/// Iterator over a [`ValueList`].
#[derive(Debug, Clone)]
pub struct ValueIter<'a> {
    r: Reader<'a>,
    left: u16,
}

impl<'a> Iterator for ValueIter<'a> {
    type Item = Option<&'a [u8]>;

    fn next(&mut self) -> Option<Self::Item> {
        self.left = self.left.checked_sub(1)?;
        self.r.value("value").ok()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(usize::from(self.left)))
    }
}

/// A validated sequence of NUL-terminated UTF-8 strings (SASL mechanisms, protocol options).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StrList<'a> {
    raw: &'a [u8],
}

impl<'a> StrList<'a> {
    /// Reads strings until an empty one (the list terminator), which is consumed.
    pub(crate) fn read_terminated(r: &mut Reader<'a>, what: &'static str) -> Result<Self, DecodeError> {
        let before = r.clone();
        while !r.cstr(what)?.is_empty() {}
        let used = before.remaining().saturating_sub(r.remaining()).saturating_sub(1);
        let raw = before.clone().bytes(used, what)?;
        Ok(Self { raw })
    }

    /// Reads exactly `count` strings.
    pub(crate) fn read_counted(r: &mut Reader<'a>, count: usize, what: &'static str) -> Result<Self, DecodeError> {
        let before = r.clone();
        for _ in 0..count {
            r.cstr(what)?;
        }
        let used = before.remaining().saturating_sub(r.remaining());
        let raw = before.clone().bytes(used, what)?;
        Ok(Self { raw })
    }

    /// The wire bytes of the strings, each with its NUL, without any list terminator.
    pub fn raw(&self) -> &'a [u8] {
        self.raw
    }

    /// Iterates the strings.
    pub fn iter(&self) -> impl Iterator<Item = &'a str> + 'a {
        let mut r = Reader::new(self.raw);
        std::iter::from_fn(move || if r.remaining() == 0 { None } else { r.cstr("string").ok() })
    }

    /// Number of strings (walks the list).
    pub fn count(&self) -> usize {
        self.iter().count()
    }
}
