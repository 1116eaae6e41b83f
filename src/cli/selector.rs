//! `-l SELECTOR`: kubectl's label selector syntax — `k=v`, `k==v`, `k!=v`,
//! `k in (a,b)`, `k notin (a,b)`, `k` and `!k`, comma separated, all of them required.

use std::collections::BTreeMap;

/// A selector that does not parse, with what kubectl would accept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "label selector {selector:?}: {problem}; use k=v, k!=v, 'k in (a,b)', 'k notin (a,b)', k or !k, comma separated"
)]
pub struct SelectorError {
    selector: String,
    problem: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// Every requirement must hold; the empty selector selects everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector(Vec<Requirement>);

impl Selector {
    pub fn parse(text: &str) -> Result<Selector, SelectorError> {
        let fail = |problem: String| SelectorError {
            selector: text.to_string(),
            problem,
        };
        let mut requirements = Vec::new();
        for part in split_top_level(text).map_err(fail)? {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            requirements.push(parse_requirement(part).map_err(fail)?);
        }
        Ok(Selector(requirements))
    }

    pub fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        let get = |k: &str| labels.and_then(|l| l.get(k));
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => get(k) == Some(v),
            Requirement::NotEquals(k, v) => get(k) != Some(v),
            Requirement::In(k, vs) => get(k).is_some_and(|v| vs.contains(v)),
            Requirement::NotIn(k, vs) => get(k).is_none_or(|v| !vs.contains(v)),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::DoesNotExist(k) => get(k).is_none(),
        })
    }
}

/// Splits at the commas that are not inside a `( … )` value set.
fn split_top_level(text: &str) -> Result<Vec<&str>, String> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if depth < 0 {
            return Err("a ')' without its '('".into());
        }
    }
    if depth != 0 {
        return Err("a '(' without its ')'".into());
    }
    parts.push(&text[start..]);
    Ok(parts)
}

fn parse_requirement(part: &str) -> Result<Requirement, String> {
    if let Some(key) = part.strip_prefix('!') {
        return Ok(Requirement::DoesNotExist(checked_key(key.trim())?));
    }
    if let Some((k, v)) = part.split_once("!=") {
        return Ok(Requirement::NotEquals(
            checked_key(k.trim())?,
            checked_value(v.trim())?,
        ));
    }
    if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
        return Ok(Requirement::Equals(
            checked_key(k.trim())?,
            checked_value(v.trim())?,
        ));
    }
    let words: Vec<&str> = part.splitn(2, char::is_whitespace).collect();
    match words.as_slice() {
        [key] => Ok(Requirement::Exists(checked_key(key)?)),
        [key, rest] => {
            let rest = rest.trim_start();
            let (negated, set) = if let Some(set) = rest.strip_prefix("notin") {
                (true, set)
            } else if let Some(set) = rest.strip_prefix("in") {
                (false, set)
            } else {
                return Err(format!("{part:?} is not a requirement"));
            };
            let values = value_set(set.trim())?;
            let key = checked_key(key)?;
            Ok(if negated {
                Requirement::NotIn(key, values)
            } else {
                Requirement::In(key, values)
            })
        }
        _ => Err(format!("{part:?} is not a requirement")),
    }
}

fn value_set(set: &str) -> Result<Vec<String>, String> {
    let inner = set
        .strip_prefix('(')
        .and_then(|s| s.strip_suffix(')'))
        .ok_or_else(|| format!("{set:?} is not a value set such as (a,b)"))?;
    inner.split(',').map(|v| checked_value(v.trim())).collect()
}

fn checked_key(key: &str) -> Result<String, String> {
    let valid = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c));
    if valid {
        Ok(key.to_string())
    } else {
        Err(format!("{key:?} is not a label key"))
    }
}

fn checked_value(value: &str) -> Result<String, String> {
    if value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        Ok(value.to_string())
    } else {
        Err(format!("{value:?} is not a label value"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn each_form_of_requirement_selects_as_kubectl() {
        let web = labels(&[("app", "web"), ("tier", "front")]);
        let db = labels(&[("app", "db")]);
        let cases = [
            ("app=web", true, false),
            ("app==web", true, false),
            ("app!=web", false, true),
            ("app in (web, cache)", true, false),
            ("app notin (web,cache)", false, true),
            ("tier", true, false),
            ("!tier", false, true),
            ("app in (web,db),!tier", false, true),
            ("app=web,tier=front", true, false),
            ("", true, true),
        ];
        for (text, on_web, on_db) in cases {
            let s = Selector::parse(text).unwrap();
            assert_eq!(s.matches(Some(&web)), on_web, "{text} on web");
            assert_eq!(s.matches(Some(&db)), on_db, "{text} on db");
        }
        assert!(Selector::parse("!app").unwrap().matches(None));
        assert!(!Selector::parse("app=web").unwrap().matches(None));
    }

    #[test]
    fn a_malformed_selector_is_an_error_naming_it() {
        for bad in ["app in (web", "app in web", "a b c", "app=we b", "=x"] {
            let err = Selector::parse(bad).unwrap_err().to_string();
            assert!(
                err.starts_with(&format!("label selector {bad:?}: ")),
                "{err}"
            );
        }
    }
}
