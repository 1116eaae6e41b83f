//! `-o jsonpath=TEMPLATE` and custom-columns' expressions: kubectl's JSONPath
//! templates (client-go's `util/jsonpath`) — text, `{.field}`, `{['key']}`, `{[N]}`,
//! `{[*]}`, `{[start:end]}`, `{..field}`, `{[?(@.k=="v")]}`, `{$}`, `{@}`,
//! `{"literal"}` and `{range EXPR}…{end}`. Missing keys print nothing, as kubectl's
//! `get`; several results of one expression are joined by a space; strings print bare,
//! objects and arrays as compact JSON.

use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("jsonpath template {template:?}: {problem}")]
pub struct JsonPathError {
    template: String,
    problem: String,
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    Text(String),
    Expr(Vec<Step>),
    Range(Vec<Step>, Vec<Node>),
}

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Root,
    Current,
    Field(String),
    Recursive(String),
    Wildcard,
    Index(i64),
    Slice(Option<i64>, Option<i64>),
    Filter(Filter),
    Literal(String),
}

#[derive(Debug, Clone, PartialEq)]
struct Filter {
    path: Vec<Step>,
    /// `None`: the path must exist.
    compare: Option<(Op, Value)>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// A parsed template, to print objects with.
#[derive(Debug, Clone, PartialEq)]
pub struct Template(Vec<Node>);

impl Template {
    pub fn parse(template: &str) -> Result<Template, JsonPathError> {
        let fail = |problem: String| JsonPathError {
            template: template.to_string(),
            problem,
        };
        let mut stack: Vec<(Vec<Step>, Vec<Node>)> = Vec::new();
        let mut nodes: Vec<Node> = Vec::new();
        let mut rest = template;
        while !rest.is_empty() {
            let Some(open) = rest.find('{') else {
                nodes.push(Node::Text(rest.to_string()));
                break;
            };
            if open > 0 {
                nodes.push(Node::Text(rest[..open].to_string()));
            }
            let close = closing_brace(&rest[open..])
                .ok_or_else(|| fail("a '{' without its '}'".into()))?
                + open;
            let inner = rest[open + 1..close].trim();
            rest = &rest[close + 1..];
            if let Some(expr) = inner.strip_prefix("range ") {
                stack.push((
                    parse_path(expr.trim()).map_err(fail)?,
                    std::mem::take(&mut nodes),
                ));
            } else if inner == "end" {
                let (path, outer) = stack
                    .pop()
                    .ok_or_else(|| fail("{end} without its {range}".into()))?;
                let body = std::mem::replace(&mut nodes, outer);
                nodes.push(Node::Range(path, body));
            } else {
                nodes.push(Node::Expr(parse_path(inner).map_err(fail)?));
            }
        }
        if !stack.is_empty() {
            return Err(fail("{range} without its {end}".into()));
        }
        Ok(Template(nodes))
    }

    /// The template printed with `root`.
    pub fn render(&self, root: &Value) -> String {
        let mut out = String::new();
        render_nodes(&self.0, root, root, &mut out);
        out
    }

    /// Every value the template's expressions yield (custom-columns' cells).
    pub fn values(&self, root: &Value) -> Vec<Value> {
        self.0
            .iter()
            .flat_map(|n| match n {
                Node::Expr(path) => eval(path, root, root),
                _ => Vec::new(),
            })
            .collect()
    }
}

/// Where the `}` that closes the `{` at 0 is, skipping quoted strings.
fn closing_brace(s: &str) -> Option<usize> {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in s.char_indices().skip(1) {
        match quote {
            Some(_) if escaped => escaped = false,
            Some(_) if c == '\\' => escaped = true,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '"' || c == '\'' => quote = Some(c),
            None if c == '}' => return Some(i),
            None => {}
        }
    }
    None
}

fn render_nodes(nodes: &[Node], root: &Value, current: &Value, out: &mut String) {
    for node in nodes {
        match node {
            Node::Text(t) => out.push_str(t),
            Node::Expr(path) => {
                let texts: Vec<String> = eval(path, root, current).iter().map(text_of).collect();
                out.push_str(&texts.join(" "));
            }
            Node::Range(path, body) => {
                for item in eval(path, root, current) {
                    render_nodes(body, root, &item, out);
                }
            }
        }
    }
}

/// How kubectl prints one result.
pub fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn eval(path: &[Step], root: &Value, current: &Value) -> Vec<Value> {
    let mut set = vec![current.clone()];
    for step in path {
        let mut next = Vec::new();
        for v in &set {
            match step {
                Step::Root => next.push(root.clone()),
                Step::Current => next.push(v.clone()),
                Step::Literal(s) => next.push(Value::String(s.clone())),
                Step::Field(name) => next.extend(v.get(name).cloned()),
                Step::Recursive(name) => collect_recursive(v, name, &mut next),
                Step::Wildcard => match v {
                    Value::Array(a) => next.extend(a.iter().cloned()),
                    Value::Object(o) => next.extend(o.values().cloned()),
                    _ => {}
                },
                Step::Index(i) => {
                    if let Value::Array(a) = v
                        && let Some(at) = index_in(*i, a.len())
                    {
                        next.push(a[at].clone());
                    }
                }
                Step::Slice(start, end) => {
                    if let Value::Array(a) = v {
                        let len = a.len();
                        let from = start.map_or(0, |s| clamp(s, len));
                        let to = end.map_or(len, |e| clamp(e, len));
                        if from < to {
                            next.extend(a[from..to].iter().cloned());
                        }
                    }
                }
                Step::Filter(f) => {
                    if let Value::Array(a) = v {
                        next.extend(a.iter().filter(|item| f.holds(root, item)).cloned());
                    }
                }
            }
        }
        set = next;
    }
    set
}

fn index_in(i: i64, len: usize) -> Option<usize> {
    let len = i64::try_from(len).ok()?;
    let at = if i < 0 { len + i } else { i };
    (0..len)
        .contains(&at)
        .then(|| usize::try_from(at).ok())
        .flatten()
}

fn clamp(i: i64, len: usize) -> usize {
    let signed_len = i64::try_from(len).unwrap_or(i64::MAX);
    let at = if i < 0 { signed_len + i } else { i };
    usize::try_from(at.clamp(0, signed_len)).unwrap_or(len)
}

fn collect_recursive(v: &Value, name: &str, out: &mut Vec<Value>) {
    match v {
        Value::Object(o) => {
            if let Some(found) = o.get(name) {
                out.push(found.clone());
            }
            for child in o.values() {
                collect_recursive(child, name, out);
            }
        }
        Value::Array(a) => a
            .iter()
            .for_each(|child| collect_recursive(child, name, out)),
        _ => {}
    }
}

impl Filter {
    fn holds(&self, root: &Value, item: &Value) -> bool {
        let found = eval(&self.path, root, item);
        let Some((op, wanted)) = &self.compare else {
            return !found.is_empty();
        };
        found.iter().any(|v| compare(v, *op, wanted))
    }
}

fn compare(v: &Value, op: Op, wanted: &Value) -> bool {
    let ordering = match (v, wanted) {
        (Value::Number(a), Value::Number(b)) => a.as_f64().partial_cmp(&b.as_f64()),
        (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
        (Value::Bool(a), Value::Bool(b)) => Some(a.cmp(b)),
        _ => None,
    };
    match (op, ordering) {
        (Op::Eq, o) => o == Some(std::cmp::Ordering::Equal),
        (Op::Ne, o) => o != Some(std::cmp::Ordering::Equal),
        (Op::Lt, Some(o)) => o.is_lt(),
        (Op::Le, Some(o)) => o.is_le(),
        (Op::Gt, Some(o)) => o.is_gt(),
        (Op::Ge, Some(o)) => o.is_ge(),
        (_, None) => false,
    }
}

/// Parses one expression: `.a.b[0]`, `$.a`, `@.a`, `..a`, `"text"`; a leading `.` is
/// optional (custom-columns' `metadata.name`).
fn parse_path(expr: &str) -> Result<Vec<Step>, String> {
    let expr = expr.trim();
    if expr.starts_with('"') || expr.starts_with('\'') {
        return Ok(vec![Step::Literal(unquote(expr)?)]);
    }
    let mut steps = Vec::new();
    let mut rest = expr;
    if let Some(r) = rest.strip_prefix('$') {
        steps.push(Step::Root);
        rest = r;
    } else if let Some(r) = rest.strip_prefix('@') {
        steps.push(Step::Current);
        rest = r;
    } else if !rest.is_empty() && !rest.starts_with('.') && !rest.starts_with('[') {
        return parse_steps(&format!(".{rest}"), steps);
    }
    parse_steps(rest, steps)
}

fn parse_steps(mut rest: &str, mut steps: Vec<Step>) -> Result<Vec<Step>, String> {
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("..") {
            let (name, after) = field_name(r);
            if name.is_empty() {
                return Err(format!("{rest:?}: '..' needs a field name"));
            }
            steps.push(Step::Recursive(name.to_string()));
            rest = after;
        } else if let Some(r) = rest.strip_prefix('.') {
            let (name, after) = field_name(r);
            match name {
                "" => {}
                "*" => steps.push(Step::Wildcard),
                _ => steps.push(Step::Field(name.to_string())),
            }
            rest = after;
        } else if rest.starts_with('[') {
            let close = bracket_end(rest).ok_or_else(|| format!("{rest:?}: '[' without ']'"))?;
            steps.push(parse_bracket(&rest[1..close])?);
            rest = &rest[close + 1..];
        } else {
            return Err(format!("unexpected {rest:?}"));
        }
    }
    Ok(steps)
}

fn field_name(s: &str) -> (&str, &str) {
    let end = s.find(['.', '[']).unwrap_or(s.len());
    (&s[..end], &s[end..])
}

/// The `]` that closes the `[` at 0, skipping quotes and nested brackets.
fn bracket_end(s: &str) -> Option<usize> {
    let (mut depth, mut quote) = (0i32, None::<char>);
    for (i, c) in s.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '"' || c == '\'' => quote = Some(c),
            None if c == '[' => depth += 1,
            None if c == ']' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            None => {}
        }
    }
    None
}

fn parse_bracket(inner: &str) -> Result<Step, String> {
    let inner = inner.trim();
    if inner == "*" {
        return Ok(Step::Wildcard);
    }
    if inner.starts_with('\'') || inner.starts_with('"') {
        return Ok(Step::Field(unquote(inner)?));
    }
    if let Some(cond) = inner.strip_prefix("?(").and_then(|c| c.strip_suffix(')')) {
        return parse_filter(cond.trim()).map(Step::Filter);
    }
    if let Some((start, end)) = inner.split_once(':') {
        let end = end.split(':').next().unwrap_or_default();
        return Ok(Step::Slice(optional_int(start)?, optional_int(end)?));
    }
    inner
        .parse::<i64>()
        .map(Step::Index)
        .map_err(|_| format!("[{inner}] is not an index, slice, '*', quoted key or filter"))
}

fn optional_int(s: &str) -> Result<Option<i64>, String> {
    let s = s.trim();
    if s.is_empty() {
        return Ok(None);
    }
    s.parse()
        .map(Some)
        .map_err(|_| format!("{s:?} is not a number"))
}

fn parse_filter(cond: &str) -> Result<Filter, String> {
    const OPS: [(&str, Op); 6] = [
        ("==", Op::Eq),
        ("!=", Op::Ne),
        ("<=", Op::Le),
        (">=", Op::Ge),
        ("<", Op::Lt),
        (">", Op::Gt),
    ];
    for (text, op) in OPS {
        if let Some((left, right)) = cond.split_once(text) {
            let right = right.trim();
            let wanted = if right.starts_with('"') || right.starts_with('\'') {
                Value::String(unquote(right)?)
            } else {
                serde_json::from_str(right).map_err(|_| format!("{right:?} is not a value"))?
            };
            return Ok(Filter {
                path: parse_path(left.trim())?,
                compare: Some((op, wanted)),
            });
        }
    }
    Ok(Filter {
        path: parse_path(cond)?,
        compare: None,
    })
}

/// A quoted literal, with Go's escapes `\n`, `\t`, `\\` and the quote.
fn unquote(s: &str) -> Result<String, String> {
    let quote = s.chars().next().unwrap_or('"');
    let body = s
        .strip_prefix(quote)
        .and_then(|b| b.strip_suffix(quote))
        .ok_or_else(|| format!("{s} is not a quoted string"))?;
    let mut out = String::new();
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some(other) => out.push(other),
            None => return Err(format!("{s} ends in a lone backslash")),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn list() -> Value {
        json!({"kind": "List", "items": [
            {"metadata": {"name": "web", "namespace": "team-a", "labels": {"app.kubernetes.io/name": "web"}},
             "spec": {"containers": [{"name": "nginx", "image": "nginx:1"}, {"name": "log", "image": "busybox"}]},
             "status": {"podIP": "10.88.0.5", "containerStatuses": [{"name": "nginx", "restartCount": 2}]}},
            {"metadata": {"name": "db", "namespace": "team-b"},
             "spec": {"containers": [{"name": "pg", "image": "postgres:16"}]},
             "status": {"containerStatuses": [{"name": "pg", "restartCount": 0}]}}
        ]})
    }

    fn render(template: &str) -> String {
        Template::parse(template).unwrap().render(&list())
    }

    /// The outputs are those kubectl's JSONPath reference documents for these templates.
    #[test]
    fn templates_print_as_kubectls() {
        assert_eq!(render("{.items[*].metadata.name}"), "web db");
        assert_eq!(render("{.items[0].metadata.name}"), "web");
        assert_eq!(render("{.items[-1].metadata.name}"), "db");
        assert_eq!(render("{.items[0:1].metadata.name}"), "web");
        assert_eq!(render("{.kind}"), "List");
        assert_eq!(render("{$.kind}"), "List");
        assert_eq!(render("{..image}"), "nginx:1 busybox postgres:16");
        assert_eq!(
            render("{range .items[*]}{.metadata.namespace}/{.metadata.name}{\"\\n\"}{end}"),
            "team-a/web\nteam-b/db\n"
        );
        assert_eq!(
            render("{range .items[*]}[{.metadata.name}, {.status.podIP}] {end}"),
            "[web, 10.88.0.5] [db, ] "
        );
        assert_eq!(
            render("{.items[?(@.metadata.name==\"db\")].spec.containers[0].image}"),
            "postgres:16"
        );
        assert_eq!(
            render("{.items[*].status.containerStatuses[?(@.restartCount>0)].name}"),
            "nginx"
        );
        assert_eq!(render("{.items[?(@.status.podIP)].metadata.name}"), "web");
        assert_eq!(
            render("{.items[0].metadata.labels['app.kubernetes.io/name']}"),
            "web"
        );
        assert_eq!(
            render("{.items[1].metadata}"),
            r#"{"name":"db","namespace":"team-b"}"#
        );
        assert_eq!(render("name: {.items[5].metadata.name}."), "name: .");
        assert_eq!(
            render("{.items[0].status.containerStatuses[0].restartCount}"),
            "2"
        );
    }

    #[test]
    fn custom_columns_expressions_may_omit_the_leading_dot() {
        let t = Template::parse("{metadata.name}").unwrap();
        let pod = json!({"metadata": {"name": "web"}});
        assert_eq!(t.values(&pod), vec![json!("web")]);
    }

    #[test]
    fn malformed_templates_are_errors_naming_the_template() {
        for bad in [
            "{.items",
            "{range .items[*]}{.a}",
            "{end}",
            "{.items[x]}",
            "{.a[?(@.b==)]}",
        ] {
            let err = Template::parse(bad).unwrap_err().to_string();
            assert!(
                err.starts_with(&format!("jsonpath template {bad:?}")),
                "{err}"
            );
        }
    }
}
