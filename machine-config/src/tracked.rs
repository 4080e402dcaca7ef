//! Decoding a JSON value into a typed struct while keeping the path to the field that failed
//! (`spec.config.storage.files[3].contents`), for the error message.
//!
//! This walks the `Value` itself: maps, lists, options, newtypes and enums hand the visitor
//! accessors whose elements are tracked again, and everything else is `serde_json`'s own
//! `&Value` deserializer. So each `Deserialize` impl is compiled once, much as a plain
//! `T::deserialize(&value)` would be. `serde_path_to_error`, which did this before, wraps the
//! deserializer *and every visitor*, compiling each impl a second time against its wrappers
//! (about 0.4 MB of the agent: docs/benchmarks.md "## Size").
//!
//! The paths and messages are the ones `serde_path_to_error` gave over `&Value`: the position
//! where the first error was raised (errors travel outwards, so the innermost), a key that
//! failed to decode included, an enum's variant as a segment. Keys are borrowed from the value;
//! nothing is allocated unless decoding fails. Map keys are read as strings (JSON's), which is
//! all the models here use.

use std::cell::Cell;
use std::fmt;

use serde::de::value::BorrowedStrDeserializer;
use serde::de::{
    self, Deserialize, DeserializeSeed, EnumAccess, IntoDeserializer, MapAccess, SeqAccess,
    Unexpected, VariantAccess, Visitor,
};
use serde_json::{Error, Map, Value};

/// One step of the path to a failed field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Segment {
    /// An element of a list.
    Seq(usize),
    /// A key of an object.
    Map(String),
    /// The variant of an externally tagged enum (`{"variant": ...}`).
    Enum(String),
}

/// A decoding error and where in the document it was raised.
#[derive(Debug)]
pub(crate) struct PathError {
    pub(crate) path: Vec<Segment>,
    pub(crate) error: Error,
}

/// The path in `serde_path_to_error`'s form: `storage.files[3].path`, `.` for the root.
pub(crate) struct DisplayPath<'a>(pub(crate) &'a [Segment]);

impl fmt::Display for DisplayPath<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str(".");
        }
        for (i, segment) in self.0.iter().enumerate() {
            match segment {
                Segment::Seq(index) => write!(f, "[{index}]")?,
                Segment::Map(key) | Segment::Enum(key) => {
                    if i > 0 {
                        f.write_str(".")?;
                    }
                    f.write_str(key)?;
                }
            }
        }
        Ok(())
    }
}

/// Decodes `value` into a `T`, naming the failed field's path on error.
pub(crate) fn deserialize<'de, T: Deserialize<'de>>(value: &'de Value) -> Result<T, PathError> {
    let track = Track(Cell::new(None));
    T::deserialize(Tracked {
        value,
        chain: &Chain::Root,
        track: &track,
    })
    .map_err(|error| PathError {
        path: track.0.into_inner().unwrap_or_default(),
        error,
    })
}

/// The path to the value being decoded, as a list linked through the callers' stack frames.
enum Chain<'c> {
    Root,
    Seq {
        parent: &'c Chain<'c>,
        index: usize,
    },
    Map {
        parent: &'c Chain<'c>,
        key: &'c str,
    },
    Enum {
        parent: &'c Chain<'c>,
        variant: &'c str,
    },
}

impl Chain<'_> {
    fn segments(&self) -> Vec<Segment> {
        let mut out = Vec::new();
        let mut at = self;
        loop {
            at = match at {
                Chain::Root => break,
                Chain::Seq { parent, index } => {
                    out.push(Segment::Seq(*index));
                    parent
                }
                Chain::Map { parent, key } => {
                    out.push(Segment::Map((*key).to_string()));
                    parent
                }
                Chain::Enum { parent, variant } => {
                    out.push(Segment::Enum((*variant).to_string()));
                    parent
                }
            };
        }
        out.reverse();
        out
    }
}

/// Where the first error was raised.
struct Track(Cell<Option<Vec<Segment>>>);

impl Track {
    /// Records `chain` unless an inner position was recorded already; returns the error.
    fn trigger(&self, chain: &Chain<'_>, error: Error) -> Error {
        let path = self.0.take().unwrap_or_else(|| chain.segments());
        self.0.set(Some(path));
        error
    }
}

/// A value being decoded and its position.
#[derive(Clone, Copy)]
struct Tracked<'de, 'c> {
    value: &'de Value,
    chain: &'c Chain<'c>,
    track: &'c Track,
}

impl<'de, 'c> Tracked<'de, 'c> {
    fn fail(&self, error: Error) -> Error {
        self.track.trigger(self.chain, error)
    }

    /// A list, as `serde_json` visits one (an error if the visitor left elements over).
    fn seq<V: Visitor<'de>>(self, items: &'de [Value], visitor: V) -> Result<V::Value, Error> {
        let mut access = TrackedSeq {
            items: items.iter(),
            index: 0,
            chain: self.chain,
            track: self.track,
        };
        let out = visitor.visit_seq(&mut access)?;
        if access.items.len() == 0 {
            Ok(out)
        } else {
            Err(de::Error::invalid_length(
                items.len(),
                &"fewer elements in array",
            ))
        }
    }

    /// An object, as `serde_json` visits one (an error if the visitor left entries over).
    fn map<V: Visitor<'de>>(
        self,
        map: &'de Map<String, Value>,
        visitor: V,
    ) -> Result<V::Value, Error> {
        let mut access = TrackedMap {
            entries: map.iter(),
            pending: None,
            chain: self.chain,
            track: self.track,
        };
        let out = visitor.visit_map(&mut access)?;
        if access.entries.len() == 0 {
            Ok(out)
        } else {
            Err(de::Error::invalid_length(
                map.len(),
                &"fewer elements in map",
            ))
        }
    }
}

/// Methods whose visitor sees no nested value: `serde_json` decodes them as it always does.
macro_rules! plain {
    ($($method:ident)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
            self.value.$method(visitor).map_err(|e| self.fail(e))
        }
    )*};
}

impl<'de> de::Deserializer<'de> for Tracked<'de, '_> {
    type Error = Error;

    plain! {
        deserialize_bool deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64
        deserialize_i128 deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64
        deserialize_u128 deserialize_f32 deserialize_f64 deserialize_char deserialize_str
        deserialize_string deserialize_unit deserialize_identifier deserialize_ignored_any
    }

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Value::Array(items) => self.seq(items, visitor),
            Value::Object(map) => self.map(map, visitor),
            other => other.deserialize_any(visitor),
        }
        .map_err(|e| self.fail(e))
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Value::Array(items) => self.seq(items, visitor),
            other => other.deserialize_bytes(visitor),
        }
        .map_err(|e| self.fail(e))
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_bytes(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
        .map_err(|e| self.fail(e))
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        // serde_json's own newtypes (`RawValue`) are read by serde_json.
        if name.starts_with("$serde_json") {
            return (self.value)
                .deserialize_newtype_struct(name, visitor)
                .map_err(|e| self.fail(e));
        }
        visitor.visit_newtype_struct(self).map_err(|e| self.fail(e))
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Value::Array(items) => self.seq(items, visitor),
            other => other.deserialize_seq(visitor),
        }
        .map_err(|e| self.fail(e))
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Value::Object(map) => self.map(map, visitor),
            other => other.deserialize_map(visitor),
        }
        .map_err(|e| self.fail(e))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.value {
            Value::Array(items) => self.seq(items, visitor),
            Value::Object(map) => self.map(map, visitor),
            other => other.deserialize_struct(name, fields, visitor),
        }
        .map_err(|e| self.fail(e))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        let (variant, value) = match self.value {
            Value::String(variant) => (variant.as_str(), None),
            // Externally tagged: `{"variant": value}`, exactly one key.
            Value::Object(map) if map.len() == 1 => {
                let (variant, value) = map.iter().next().expect("one entry");
                (variant.as_str(), Some(value))
            }
            other => {
                return other
                    .deserialize_enum(name, variants, visitor)
                    .map_err(|e| self.fail(e));
            }
        };
        let access = TrackedEnum {
            variant,
            value,
            at: self,
        };
        visitor.visit_enum(access).map_err(|e| self.fail(e))
    }
}

/// The elements of a list, each decoded at its index.
struct TrackedSeq<'de, 'c> {
    items: std::slice::Iter<'de, Value>,
    index: usize,
    chain: &'c Chain<'c>,
    track: &'c Track,
}

impl<'de> SeqAccess<'de> for TrackedSeq<'de, '_> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        let Some(value) = self.items.next() else {
            return Ok(None);
        };
        let chain = Chain::Seq {
            parent: self.chain,
            index: self.index,
        };
        self.index += 1;
        let track = self.track;
        let element = Tracked {
            value,
            chain: &chain,
            track,
        };
        seed.deserialize(element)
            .map(Some)
            .map_err(|e| track.trigger(&chain, e))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

/// The entries of an object, each value decoded under its key.
struct TrackedMap<'de, 'c> {
    entries: serde_json::map::Iter<'de>,
    pending: Option<(&'de str, &'de Value)>,
    chain: &'c Chain<'c>,
    track: &'c Track,
}

impl<'de> MapAccess<'de> for TrackedMap<'de, '_> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let Some((key, value)) = self.entries.next() else {
            return Ok(None);
        };
        self.pending = Some((key.as_str(), value));
        seed.deserialize(BorrowedStrDeserializer::new(key.as_str()))
            .map(Some)
            .map_err(|e| {
                let chain = Chain::Map {
                    parent: self.chain,
                    key: key.as_str(),
                };
                self.track.trigger(&chain, e)
            })
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let Some((key, value)) = self.pending.take() else {
            return Err(de::Error::custom("value is missing"));
        };
        let chain = Chain::Map {
            parent: self.chain,
            key,
        };
        let track = self.track;
        let entry = Tracked {
            value,
            chain: &chain,
            track,
        };
        seed.deserialize(entry)
            .map_err(|e| track.trigger(&chain, e))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}

/// An enum as a variant name (`"variant"`) or a one-key object (`{"variant": value}`).
struct TrackedEnum<'de, 'c> {
    variant: &'de str,
    value: Option<&'de Value>,
    at: Tracked<'de, 'c>,
}

impl<'de, 'c> EnumAccess<'de> for TrackedEnum<'de, 'c> {
    type Error = Error;
    type Variant = TrackedVariant<'de, 'c>;

    fn variant_seed<S: DeserializeSeed<'de>>(
        self,
        seed: S,
    ) -> Result<(S::Value, Self::Variant), Error> {
        let name: de::value::StrDeserializer<'_, Error> = self.variant.into_deserializer();
        let tag = seed.deserialize(name).map_err(|e| self.at.fail(e))?;
        let variant = TrackedVariant {
            variant: self.variant,
            value: self.value,
            at: self.at,
        };
        Ok((tag, variant))
    }
}

/// A variant's contents, decoded under the variant's name.
struct TrackedVariant<'de, 'c> {
    variant: &'de str,
    value: Option<&'de Value>,
    at: Tracked<'de, 'c>,
}

impl<'de> TrackedVariant<'de, '_> {
    /// Runs `f` with the contents tracked at `<enum path>.<variant>`.
    fn within<R>(
        self,
        f: impl FnOnce(Option<Tracked<'de, '_>>) -> Result<R, Error>,
    ) -> Result<R, Error> {
        let chain = Chain::Enum {
            parent: self.at.chain,
            variant: self.variant,
        };
        let track = self.at.track;
        let contents = self.value.map(|value| Tracked {
            value,
            chain: &chain,
            track,
        });
        f(contents).map_err(|e| track.trigger(&chain, e))
    }
}

impl<'de> VariantAccess<'de> for TrackedVariant<'de, '_> {
    type Error = Error;

    fn unit_variant(self) -> Result<(), Error> {
        self.within(|contents| match contents {
            Some(contents) => <()>::deserialize(contents.value),
            None => Ok(()),
        })
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, Error> {
        self.within(|contents| match contents {
            Some(contents) => seed.deserialize(contents),
            None => Err(de::Error::invalid_type(
                Unexpected::UnitVariant,
                &"newtype variant",
            )),
        })
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value, Error> {
        self.within(|contents| match contents {
            Some(contents) => match contents.value {
                Value::Array(items) if items.is_empty() => visitor.visit_unit(),
                Value::Array(items) => contents.seq(items, visitor),
                other => Err(de::Error::invalid_type(unexpected(other), &"tuple variant")),
            },
            None => Err(de::Error::invalid_type(
                Unexpected::UnitVariant,
                &"tuple variant",
            )),
        })
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.within(|contents| match contents {
            Some(contents) => match contents.value {
                Value::Object(map) => contents.map(map, visitor),
                other => Err(de::Error::invalid_type(
                    unexpected(other),
                    &"struct variant",
                )),
            },
            None => Err(de::Error::invalid_type(
                Unexpected::UnitVariant,
                &"struct variant",
            )),
        })
    }
}

/// A value as serde describes it in an `invalid type` message (as serde_json does).
fn unexpected(value: &Value) -> Unexpected<'_> {
    match value {
        Value::Null => Unexpected::Unit,
        Value::Bool(b) => Unexpected::Bool(*b),
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => Unexpected::Unsigned(u),
            (None, Some(i)) => Unexpected::Signed(i),
            _ => Unexpected::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => Unexpected::Str(s),
        Value::Array(_) => Unexpected::Seq,
        Value::Object(_) => Unexpected::Map,
    }
}

#[cfg(test)]
#[path = "tracked_tests.rs"]
mod tests;
