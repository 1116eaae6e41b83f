//! Network config lists as libcni loads them: the lexicographically first `*.conflist`,
//! `*.conf` or `*.json` of the conf dir; a single-plugin `.conf`/`.json` is wrapped into
//! a list of one. The plugins' own keys are kept verbatim: podhost passes each plugin its
//! config object unchanged except for the keys the spec says the runtime sets.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::CniFormatError;
use super::version::SpecVersion;

/// The file extensions a conf dir's configs have (libcni's `ConfFiles` set).
pub const CONFIG_EXTENSIONS: [&str; 3] = ["conflist", "conf", "json"];

/// A validated network config list.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigList {
    /// The file it came from (for messages).
    pub file: PathBuf,
    pub name: String,
    pub cni_version: SpecVersion,
    /// `cniVersion` as written, passed to plugins unchanged.
    pub cni_version_text: String,
    /// `disableCheck`: the runtime must not run CHECK.
    pub disable_check: bool,
    pub plugins: Vec<PluginConfig>,
}

/// One plugin of a list.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginConfig {
    /// `type`: the executable's name in the bin dirs.
    pub plugin_type: String,
    /// `capabilities.portMappings`: the plugin wants `runtimeConfig.portMappings`.
    pub wants_port_mappings: bool,
    /// The plugin's config object as written.
    pub raw: Map<String, Value>,
}

/// The config file to use among `names` (file names of a directory): the first in byte
/// order with a config extension, hidden files left out, as libcni sorts them.
pub fn choose_config_file<I, S>(names: I) -> Option<String>
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    names
        .into_iter()
        .map(Into::into)
        .filter(|n| !n.starts_with('.'))
        .filter(|n| {
            Path::new(n)
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| CONFIG_EXTENSIONS.contains(&e))
        })
        .min()
}

/// Parses and validates the config file `file` with content `bytes`.
pub fn parse_config_file(file: &Path, bytes: &[u8]) -> Result<ConfigList, CniFormatError> {
    let bad = |problem: String| CniFormatError::Config {
        file: file.to_path_buf(),
        problem,
    };
    let value: Value =
        serde_json::from_slice(bytes).map_err(|source| CniFormatError::ConfigJson {
            file: file.to_path_buf(),
            source,
        })?;
    let Value::Object(top) = value else {
        return Err(bad("the top level is not a JSON object".into()));
    };
    let is_list = file.extension().is_some_and(|e| e == "conflist") || top.contains_key("plugins");
    let name = required_string(file, "", &top, "name")?;
    let version_text = required_string(file, "", &top, "cniVersion")?;
    let cni_version = SpecVersion::parse(&version_text).ok_or_else(|| {
        bad(format!(
            "cniVersion {version_text:?} is not a version like \"1.0.0\""
        ))
    })?;
    if !cni_version.at_least(SpecVersion::OLDEST_RESULT) {
        return Err(bad(format!(
            "cniVersion {version_text} is older than 0.3.0, whose results podhost cannot read; \
             use 0.3.1, 0.4.0 or 1.0.0"
        )));
    }
    let raw_plugins: Vec<Map<String, Value>> = if is_list {
        match top.get("plugins") {
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, p)| match p {
                    Value::Object(o) => Ok(o.clone()),
                    _ => Err(bad(format!("plugins[{i}] is not an object"))),
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(bad("\"plugins\" is not a list".into())),
            None => return Err(bad("a .conflist needs a \"plugins\" list".into())),
        }
    } else {
        // A single plugin's config is its own (only) plugin, as libcni's ConfListFromConf.
        vec![top.clone()]
    };
    if raw_plugins.is_empty() {
        return Err(bad("\"plugins\" is empty: list at least one plugin".into()));
    }
    let plugins = raw_plugins
        .into_iter()
        .enumerate()
        .map(|(i, raw)| plugin_config(file, i, raw))
        .collect::<Result<Vec<_>, _>>()?;
    let disable_check = match top.get("disableCheck") {
        None => false,
        Some(Value::Bool(b)) => *b,
        // libcni also takes the strings "true"/"false".
        Some(Value::String(s)) if s == "true" || s == "false" => s == "true",
        Some(other) => return Err(bad(format!("disableCheck {other} is not true or false"))),
    };
    Ok(ConfigList {
        file: file.to_path_buf(),
        name,
        cni_version,
        cni_version_text: version_text,
        disable_check,
        plugins,
    })
}

/// `obj[key]` as a non-empty string; the error names `file` and `at` (where `obj` is).
fn required_string(
    file: &Path,
    at: &str,
    obj: &Map<String, Value>,
    key: &str,
) -> Result<String, CniFormatError> {
    let problem = match obj.get(key) {
        Some(Value::String(s)) if !s.trim().is_empty() => return Ok(s.clone()),
        Some(Value::String(_)) => "is empty",
        Some(_) => "is not a string",
        None => "is missing",
    };
    Err(CniFormatError::Config {
        file: file.to_path_buf(),
        problem: format!("{at}{key:?} {problem}"),
    })
}

fn plugin_config(
    file: &Path,
    index: usize,
    raw: Map<String, Value>,
) -> Result<PluginConfig, CniFormatError> {
    let plugin_type = required_string(file, &format!("plugins[{index}]: "), &raw, "type")?;
    // The type names an executable inside the bin dirs; a path would run anything.
    let plain = plugin_type
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && plugin_type != "."
        && plugin_type != "..";
    if !plain {
        return Err(CniFormatError::Config {
            file: file.to_path_buf(),
            problem: format!(
                "plugins[{index}]: type {plugin_type:?} is not a plain executable name \
                 (letters, digits, '-', '_', '.')"
            ),
        });
    }
    let wants_port_mappings = raw
        .get("capabilities")
        .and_then(|c| c.get("portMappings"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    Ok(PluginConfig {
        plugin_type,
        wants_port_mappings,
        raw,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(file: &str, text: &str) -> Result<ConfigList, CniFormatError> {
        parse_config_file(Path::new(file), text.as_bytes())
    }

    #[test]
    fn the_first_config_file_in_byte_order_is_chosen() {
        let names = [
            "99-late.conflist",
            "10-b.conf",
            ".00-hidden.conflist",
            "05-notes.txt",
            "10-a.json",
        ];
        assert_eq!(choose_config_file(names).as_deref(), Some("10-a.json"));
        assert_eq!(choose_config_file(["README", "x.yaml"]), None);
    }

    #[test]
    fn a_conflist_keeps_its_plugins_in_order_and_capabilities() {
        let list = parse(
            "10-net.conflist",
            r#"{"cniVersion":"1.0.0","name":"pods","plugins":[
                {"type":"bridge","bridge":"cni0","ipam":{"type":"host-local"}},
                {"type":"portmap","capabilities":{"portMappings":true}},
                {"type":"firewall"}]}"#,
        )
        .unwrap();
        assert_eq!(list.name, "pods");
        assert_eq!(list.cni_version, SpecVersion(1, 0, 0));
        let types: Vec<_> = list
            .plugins
            .iter()
            .map(|p| p.plugin_type.as_str())
            .collect();
        assert_eq!(types, ["bridge", "portmap", "firewall"]);
        assert!(!list.plugins[0].wants_port_mappings);
        assert!(list.plugins[1].wants_port_mappings);
        assert_eq!(list.plugins[0].raw["bridge"], "cni0");
        assert!(!list.disable_check);
    }

    #[test]
    fn a_single_plugin_conf_becomes_a_list_of_one() {
        let list = parse(
            "10-net.conf",
            r#"{"cniVersion":"0.4.0","name":"one","type":"ptp","disableCheck":"true"}"#,
        )
        .unwrap();
        assert_eq!(list.plugins.len(), 1);
        assert_eq!(list.plugins[0].plugin_type, "ptp");
        assert!(list.disable_check);
    }

    #[test]
    fn invalid_configs_name_the_file_and_the_problem() {
        let cases = [
            ("a.conflist", "{", "not valid JSON"),
            (
                "a.conflist",
                r#"{"cniVersion":"1.0.0","plugins":[{"type":"x"}]}"#,
                "\"name\" is missing",
            ),
            (
                "a.conflist",
                r#"{"name":"n","plugins":[{"type":"x"}]}"#,
                "\"cniVersion\" is missing",
            ),
            (
                "a.conflist",
                r#"{"name":"n","cniVersion":"new","plugins":[{"type":"x"}]}"#,
                "is not a version",
            ),
            (
                "a.conflist",
                r#"{"name":"n","cniVersion":"0.2.0","plugins":[{"type":"x"}]}"#,
                "older than 0.3.0",
            ),
            (
                "a.conflist",
                r#"{"name":"n","cniVersion":"1.0.0","plugins":[]}"#,
                "is empty",
            ),
            (
                "a.conflist",
                r#"{"name":"n","cniVersion":"1.0.0"}"#,
                "needs a \"plugins\" list",
            ),
            (
                "a.conflist",
                r#"{"name":"n","cniVersion":"1.0.0","plugins":[{"ipam":{}}]}"#,
                "plugins[0]: \"type\" is missing",
            ),
            (
                "a.conflist",
                r#"{"name":"n","cniVersion":"1.0.0","plugins":[{"type":"../../bin/sh"}]}"#,
                "not a plain executable name",
            ),
            (
                "a.conf",
                r#"{"name":"n","cniVersion":"1.0.0"}"#,
                "plugins[0]: \"type\" is missing",
            ),
        ];
        for (file, text, want) in cases {
            let err = parse(file, text).unwrap_err().to_string();
            assert!(err.contains(file), "{err}");
            assert!(err.contains(want), "{text}: {err}");
        }
    }
}
