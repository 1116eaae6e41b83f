//! `-o custom-columns=HEADER:EXPR,…`: a column per JSONPath expression (`.a.b`,
//! `{.a.b}` or `a.b`), as kubectl prints them — each cell the expression's values joined
//! by commas, `<none>` when it yields none.

use serde_json::Value;

use super::jsonpath::{JsonPathError, Template, text_of};
use super::table::align_min;

#[derive(Debug, thiserror::Error)]
pub enum CustomColumnsError {
    #[error(
        "custom-columns {spec:?}: {column:?} is not HEADER:EXPRESSION (e.g. NAME:.metadata.name)"
    )]
    Column { spec: String, column: String },
    #[error("custom-columns: {0}")]
    Expression(#[from] JsonPathError),
}

/// The columns, parsed once for every row.
#[derive(Debug)]
pub struct CustomColumns(Vec<(String, Template)>);

impl CustomColumns {
    pub fn parse(spec: &str) -> Result<CustomColumns, CustomColumnsError> {
        let mut columns = Vec::new();
        for column in spec.split(',') {
            let Some((header, expr)) = column
                .split_once(':')
                .filter(|(h, e)| !h.is_empty() && !e.is_empty())
            else {
                return Err(CustomColumnsError::Column {
                    spec: spec.to_string(),
                    column: column.to_string(),
                });
            };
            let braced = if expr.starts_with('{') {
                expr.to_string()
            } else {
                format!("{{{expr}}}")
            };
            columns.push((header.to_string(), Template::parse(&braced)?));
        }
        Ok(CustomColumns(columns))
    }

    /// The table of `objects`, a row each, with the header unless `no_headers`.
    pub fn render(&self, objects: &[Value], no_headers: bool) -> String {
        let mut rows: Vec<Vec<String>> = Vec::new();
        if !no_headers {
            rows.push(self.0.iter().map(|(h, _)| h.clone()).collect());
        }
        for object in objects {
            rows.push(
                self.0
                    .iter()
                    .map(|(_, t)| cell(&t.values(object)))
                    .collect(),
            );
        }
        align_min(&rows, super::table::KUBECTL_MIN_WIDTH)
    }
}

fn cell(values: &[Value]) -> String {
    let texts: Vec<String> = values
        .iter()
        .filter(|v| !v.is_null())
        .map(text_of)
        .collect();
    if texts.is_empty() {
        "<none>".into()
    } else {
        texts.join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// As kubectl's documented example, `-o custom-columns=NAME:.metadata.name,RSRC:.metadata.resourceVersion`,
    /// with a column that yields several values and one that yields none.
    #[test]
    fn columns_print_as_kubectls() {
        let pods = [
            json!({"metadata": {"name": "web", "resourceVersion": "12"},
                   "spec": {"containers": [{"image": "nginx:1"}, {"image": "busybox"}]}}),
            json!({"metadata": {"name": "a"}, "spec": {"containers": [{"image": "pause"}]}}),
        ];
        let cols = CustomColumns::parse(
            "NAME:.metadata.name,RSRC:.metadata.resourceVersion,IMAGES:spec.containers[*].image",
        )
        .unwrap();
        assert_eq!(
            cols.render(&pods, false),
            "NAME   RSRC     IMAGES\n\
             web    12       nginx:1,busybox\n\
             a      <none>   pause\n"
        );
        assert_eq!(cols.render(&pods[1..], true), "a     <none>   pause\n");
    }

    #[test]
    fn a_column_without_an_expression_is_an_error() {
        let err = CustomColumns::parse("NAME:.metadata.name,IP").unwrap_err();
        assert!(
            err.to_string().contains("\"IP\" is not HEADER:EXPRESSION"),
            "{err}"
        );
    }
}
