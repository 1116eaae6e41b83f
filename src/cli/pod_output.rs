//! `get pods -o FORMAT`: kubectl's table (plain or `wide`), `name`, `json`, `yaml`,
//! `jsonpath=TEMPLATE` and `custom-columns=SPEC`. One pod asked for by name prints as
//! the object itself; otherwise as kubectl's `List`.

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::custom_columns::{CustomColumns, CustomColumnsError};
use super::jsonpath::{JsonPathError, Template};
use super::table::{PodColumns, render_pod_table};

#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error(
        "unknown output format {0:?}: use wide, name, json, yaml, jsonpath=TEMPLATE or custom-columns=SPEC"
    )]
    Unknown(String),
    #[error(transparent)]
    JsonPath(#[from] JsonPathError),
    #[error(transparent)]
    CustomColumns(#[from] CustomColumnsError),
    #[error("printing the pods: {0}")]
    Encode(String),
}

/// What `-o` asked for.
pub enum OutputFormat {
    Table { wide: bool },
    Name,
    Json,
    Yaml,
    JsonPath(Template),
    CustomColumns(CustomColumns),
}

impl OutputFormat {
    pub fn parse(output: Option<&str>) -> Result<OutputFormat, OutputError> {
        let Some(output) = output else {
            return Ok(OutputFormat::Table { wide: false });
        };
        if let Some(template) = output.strip_prefix("jsonpath=") {
            return Ok(OutputFormat::JsonPath(Template::parse(template)?));
        }
        if let Some(spec) = output.strip_prefix("custom-columns=") {
            return Ok(OutputFormat::CustomColumns(CustomColumns::parse(spec)?));
        }
        match output {
            "wide" => Ok(OutputFormat::Table { wide: true }),
            "name" => Ok(OutputFormat::Name),
            "json" => Ok(OutputFormat::Json),
            "yaml" => Ok(OutputFormat::Yaml),
            other => Err(OutputError::Unknown(other.to_string())),
        }
    }

    /// Whether this prints a table (whose emptiness kubectl reports on stderr).
    pub fn is_table(&self) -> bool {
        matches!(
            self,
            OutputFormat::Table { .. } | OutputFormat::CustomColumns(_)
        )
    }
}

/// How the pods print: as one object (`single`, one pod asked for by name) or a list.
pub struct PodPrint {
    pub columns: PodColumns,
    pub single: bool,
}

pub fn render(
    pods: &[Pod],
    format: &OutputFormat,
    print: &PodPrint,
    now: DateTime<Utc>,
) -> Result<String, OutputError> {
    let encode = |e: &dyn std::fmt::Display| OutputError::Encode(e.to_string());
    Ok(match format {
        OutputFormat::Table { wide } => {
            let columns = PodColumns {
                wide: *wide,
                ..print.columns
            };
            render_pod_table(pods, columns, now)
        }
        OutputFormat::Name => pods
            .iter()
            .map(|p| format!("pod/{}\n", p.metadata.name.as_deref().unwrap_or_default()))
            .collect(),
        OutputFormat::Json => {
            let mut text = serde_json::to_string_pretty(&object(pods, print.single)?)
                .map_err(|e| encode(&e))?;
            text.push('\n');
            text
        }
        OutputFormat::Yaml => {
            serde_yaml_ng::to_string(&object(pods, print.single)?).map_err(|e| encode(&e))?
        }
        OutputFormat::JsonPath(template) => template.render(&object(pods, print.single)?),
        OutputFormat::CustomColumns(columns) => {
            let objects = pods
                .iter()
                .map(serde_json::to_value)
                .collect::<Result<Vec<Value>, _>>()
                .map_err(|e| encode(&e))?;
            columns.render(&objects, print.columns.no_headers)
        }
    })
}

/// The pod itself, or kubectl's `List` of them.
fn object(pods: &[Pod], single: bool) -> Result<Value, OutputError> {
    let encode = |e: serde_json::Error| OutputError::Encode(e.to_string());
    if single && let [pod] = pods {
        // k8s-openapi writes the Pod's apiVersion and kind.
        return serde_json::to_value(pod).map_err(encode);
    }
    let items = pods
        .iter()
        .map(|p| object(std::slice::from_ref(p), true))
        .collect::<Result<Vec<Value>, _>>()?;
    Ok(json!({
        "apiVersion": "v1",
        "items": items,
        "kind": "List",
        "metadata": {"resourceVersion": ""},
    }))
}
