//! A JSON value whose objects keep their keys in file order, so editing a person's
//! settings file changes only what baton adds (serde_json's own `Value` sorts keys).

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};

#[derive(Debug, Clone, PartialEq)]
pub enum Ordered {
    Null,
    Bool(bool),
    Num(serde_json::Number),
    Str(String),
    Arr(Vec<Ordered>),
    Obj(Vec<(String, Ordered)>),
}

impl Ordered {
    pub fn get(&self, key: &str) -> Option<&Ordered> {
        match self {
            Ordered::Obj(kv) => kv.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn get_mut(&mut self, key: &str) -> Option<&mut Ordered> {
        match self {
            Ordered::Obj(kv) => kv.iter_mut().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn remove(&mut self, key: &str) {
        if let Ordered::Obj(kv) = self {
            kv.retain(|(k, _)| k != key);
        }
    }

    pub fn as_array(&self) -> Option<&Vec<Ordered>> {
        match self {
            Ordered::Arr(v) => Some(v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Ordered::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The object at `key`, made (empty, last) if missing; `None` if it is another kind.
    pub fn entry_obj(&mut self, key: &str) -> Option<&mut Ordered> {
        self.entry(key, Ordered::Obj(Vec::new()))
            .filter(|v| matches!(v, Ordered::Obj(_)))
    }

    /// The list at `key`, made (empty, last) if missing; `None` if it is another kind.
    pub fn entry_arr(&mut self, key: &str) -> Option<&mut Vec<Ordered>> {
        match self.entry(key, Ordered::Arr(Vec::new()))? {
            Ordered::Arr(v) => Some(v),
            _ => None,
        }
    }

    fn entry(&mut self, key: &str, empty: Ordered) -> Option<&mut Ordered> {
        let Ordered::Obj(kv) = self else { return None };
        let i = match kv.iter().position(|(k, _)| k == key) {
            Some(i) => i,
            None => {
                kv.push((key.to_owned(), empty));
                kv.len() - 1
            }
        };
        kv.get_mut(i).map(|(_, v)| v)
    }
}

impl Serialize for Ordered {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Ordered::Null => s.serialize_unit(),
            Ordered::Bool(b) => s.serialize_bool(*b),
            Ordered::Num(n) => n.serialize(s),
            Ordered::Str(v) => s.serialize_str(v),
            Ordered::Arr(v) => {
                let mut seq = s.serialize_seq(Some(v.len()))?;
                for x in v {
                    seq.serialize_element(x)?;
                }
                seq.end()
            }
            Ordered::Obj(kv) => {
                let mut map = s.serialize_map(Some(kv.len()))?;
                for (k, v) in kv {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

struct V;

impl<'de> Visitor<'de> for V {
    type Value = Ordered;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E>(self) -> Result<Ordered, E> {
        Ok(Ordered::Null)
    }
    fn visit_bool<E>(self, b: bool) -> Result<Ordered, E> {
        Ok(Ordered::Bool(b))
    }
    fn visit_i64<E>(self, n: i64) -> Result<Ordered, E> {
        Ok(Ordered::Num(n.into()))
    }
    fn visit_u64<E>(self, n: u64) -> Result<Ordered, E> {
        Ok(Ordered::Num(n.into()))
    }
    fn visit_f64<E: de::Error>(self, n: f64) -> Result<Ordered, E> {
        serde_json::Number::from_f64(n)
            .map(Ordered::Num)
            .ok_or_else(|| E::custom("a number JSON cannot hold"))
    }
    fn visit_str<E>(self, s: &str) -> Result<Ordered, E> {
        Ok(Ordered::Str(s.to_owned()))
    }
    fn visit_string<E>(self, s: String) -> Result<Ordered, E> {
        Ok(Ordered::Str(s))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Ordered, A::Error> {
        let mut v = Vec::new();
        while let Some(x) = a.next_element()? {
            v.push(x);
        }
        Ok(Ordered::Arr(v))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Ordered, A::Error> {
        let mut kv: Vec<(String, Ordered)> = Vec::new();
        while let Some((k, v)) = a.next_entry::<String, Ordered>()? {
            // A repeated key: the last one wins, as in serde_json, in the first's place.
            match kv.iter_mut().find(|(q, _)| *q == k) {
                Some(slot) => slot.1 = v,
                None => kv.push((k, v)),
            }
        }
        Ok(Ordered::Obj(kv))
    }
}

impl<'de> Deserialize<'de> for Ordered {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Ordered, D::Error> {
        d.deserialize_any(V)
    }
}
