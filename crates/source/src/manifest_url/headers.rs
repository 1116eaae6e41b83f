//! `--manifest-url-header` values → the request's headers, as the kubelet's
//! `ColonSeparatedMultimapStringString`: each value is `name:value,name:value`, split on
//! `,` then on the first `:`, both sides trimmed; empty pairs are skipped; the flag may
//! be repeated and values of one name accumulate in the order given (sent as repeated
//! header lines).

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use super::ManifestUrlError;

/// Parses every `--manifest-url-header` value into one header map.
pub fn parse_headers(values: &[String]) -> Result<HeaderMap, ManifestUrlError> {
    let mut headers = HeaderMap::new();
    for value in values {
        for pair in value.split(',').filter(|p| !p.is_empty()) {
            let bad = |why: &str| ManifestUrlError::Header {
                pair: pair.to_string(),
                why: why.to_string(),
            };
            let (name, val) = pair
                .split_once(':')
                .ok_or_else(|| bad("expected name:value"))?;
            let (name, val) = (name.trim(), val.trim());
            if name.is_empty() {
                return Err(bad("the header name is empty"));
            }
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| bad("the name is not a valid HTTP header name"))?;
            let val = HeaderValue::from_str(val)
                .map_err(|_| bad("the value holds characters HTTP headers cannot carry"))?;
            headers.append(name, val);
        }
    }
    Ok(headers)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(h: &HeaderMap, name: &str) -> Vec<String> {
        h.get_all(name)
            .iter()
            .map(|v| v.to_str().unwrap().to_string())
            .collect()
    }

    /// The kubelet's own example: `--manifest-url-header 'a:hello,b:again,c:world'
    /// --manifest-url-header 'b:beautiful'` gives a=[hello], b=[again, beautiful],
    /// c=[world].
    #[test]
    fn values_of_one_name_accumulate_across_flags() {
        let h = parse_headers(&["a:hello,b:again,c:world".into(), "b:beautiful".into()]).unwrap();
        assert_eq!(values(&h, "a"), ["hello"]);
        assert_eq!(values(&h, "b"), ["again", "beautiful"]);
        assert_eq!(values(&h, "c"), ["world"]);
        assert_eq!(h.len(), 4);
    }

    #[test]
    fn pairs_are_trimmed_split_on_the_first_colon_and_empty_pairs_skipped() {
        let h = parse_headers(&[" Authorization : Bearer a:b ,,X-Empty:".into()]).unwrap();
        assert_eq!(values(&h, "authorization"), ["Bearer a:b"]);
        assert_eq!(values(&h, "x-empty"), [""]);
        assert!(parse_headers(&[]).unwrap().is_empty());
        assert!(parse_headers(&["".into()]).unwrap().is_empty());
    }

    #[test]
    fn malformed_pairs_are_refused_naming_the_pair() {
        for (given, why) in [
            ("novalue", "expected name:value"),
            (":v", "the header name is empty"),
            ("bad name:v", "not a valid HTTP header name"),
            ("a:x\u{7}y", "cannot carry"),
        ] {
            let err = parse_headers(&[given.into()]).unwrap_err().to_string();
            assert!(
                err.contains(&format!("{given:?}")) && err.contains(why),
                "{err}"
            );
            assert!(err.starts_with("--manifest-url-header"), "{err}");
        }
    }
}
