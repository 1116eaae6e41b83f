use super::*;
use podhost_model::env::ConfigLookup;

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

fn errors(o: &ConfigObjects) -> Vec<String> {
    o.errors().iter().map(ToString::to_string).collect()
}

#[test]
fn yaml_documents_json_and_lists_load_with_defaults_and_merges() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "app.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {MODE: prod}\nbinaryData: {blob: AAEC}\n---\n---\nkind: Secret\nmetadata: {name: db, namespace: prod}\ndata: {PASSWORD: czNjcmV0, USER: YWRtaW4=}\nstringData: {USER: root}\n",
    );
    write(
        dir.path(),
        "list.json",
        r#"{"apiVersion":"v1","kind":"List","items":[{"kind":"ConfigMap","metadata":{"name":"one"},"data":{"a":"1"}}]}"#,
    );
    write(
        dir.path(),
        "more.yaml",
        "kind: SecretList\nitems:\n- metadata: {name: tls}\n  stringData: {tls.crt: CERT}\n",
    );
    write(dir.path(), ".hidden.yaml", "this is: [not valid");
    let o = ConfigObjects::load(dir.path());
    assert!(o.errors().is_empty(), "{:?}", errors(&o));
    assert_eq!(o.counts(), (2, 2));
    let app = o.config_map("default", "app").unwrap();
    assert_eq!(app.data.as_ref().unwrap()["MODE"], "prod");
    assert_eq!(app.binary_data.as_ref().unwrap()["blob"].0, vec![0, 1, 2]);
    let db = o.secret("prod", "db").unwrap();
    let data = db.data.as_ref().unwrap();
    assert_eq!(data["PASSWORD"].0, b"s3cret");
    assert_eq!(data["USER"].0, b"root", "stringData wins over data");
    assert!(db.string_data.is_none());
    assert_eq!(
        o.secret("default", "tls").unwrap().data.as_ref().unwrap()["tls.crt"].0,
        b"CERT"
    );
    assert!(o.config_map("default", "one").is_some());
    assert!(
        o.config_map("prod", "app").is_none(),
        "lookups are by namespace"
    );
}

#[test]
fn a_missing_dir_is_an_empty_store() {
    let dir = tempfile::tempdir().unwrap();
    let o = ConfigObjects::load(&dir.path().join("absent"));
    assert_eq!(o.counts(), (0, 0));
    assert!(o.errors().is_empty());
}

#[test]
fn bad_files_and_objects_are_reported_without_hiding_good_ones() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "a-good.yaml",
        "kind: ConfigMap\nmetadata: {name: good}\ndata: {k: v}\n",
    );
    write(
        dir.path(),
        "b-syntax.yaml",
        "kind: ConfigMap\nmetadata: {name: [\n",
    );
    write(
        dir.path(),
        "c-key.yaml",
        "kind: ConfigMap\nmetadata: {name: badkey}\ndata: {\"a/b\": v}\n",
    );
    write(
        dir.path(),
        "d-dup.yaml",
        "kind: ConfigMap\nmetadata: {name: good}\ndata: {k: other}\n",
    );
    write(
        dir.path(),
        "e-kind.yaml",
        "kind: Pod\nmetadata: {name: p}\n",
    );
    write(
        dir.path(),
        "f-b64.yaml",
        "kind: Secret\nmetadata: {name: s}\ndata: {k: '%%%'}\n",
    );
    write(
        dir.path(),
        "g-name.yaml",
        "kind: Secret\nmetadata: {name: Bad_Name}\n",
    );
    write(
        dir.path(),
        "h-both.yaml",
        "kind: ConfigMap\nmetadata: {name: both}\ndata: {k: v}\nbinaryData: {k: AA==}\n",
    );
    write(
        dir.path(),
        "i-dotkey.yaml",
        "kind: ConfigMap\nmetadata: {name: dots}\ndata: {..data: v}\n",
    );
    std::fs::create_dir(dir.path().join("j-subdir")).unwrap();
    let o = ConfigObjects::load(dir.path());
    assert_eq!(o.counts(), (1, 0));
    assert_eq!(
        o.config_map("default", "good")
            .unwrap()
            .data
            .as_ref()
            .unwrap()["k"],
        "v"
    );
    let errs = errors(&o);
    assert_eq!(errs.len(), 9, "{errs:#?}");
    let expect = [
        "b-syntax.yaml, document 1: ",
        "c-key.yaml: ConfigMap default/badkey: data/binaryData key \"a/b\"",
        "d-dup.yaml: ConfigMap default/good is already defined in",
        "e-kind.yaml, document 1: kind \"Pod\" is not supported",
        "f-b64.yaml, document 1: Secret: ",
        "g-name.yaml: Secret default/Bad_Name: metadata.name",
        "h-both.yaml: ConfigMap default/both: key \"k\" is in both data and binaryData",
        "i-dotkey.yaml: ConfigMap default/dots: data/binaryData key \"..data\": must not be '.' or start with '..'",
        "j-subdir is not a regular file",
    ];
    for (err, want) in errs.iter().zip(expect) {
        assert!(err.contains(want), "{err:?} should contain {want:?}");
    }
}

#[test]
fn oversized_data_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let big = "x".repeat(MAX_OBJECT_DATA + 1);
    write(
        dir.path(),
        "big.yaml",
        &format!("kind: ConfigMap\nmetadata: {{name: big}}\ndata: {{k: {big}}}\n"),
    );
    let o = ConfigObjects::load(dir.path());
    assert_eq!(o.counts(), (0, 0));
    assert!(
        errors(&o)[0].contains("more than the 1048576"),
        "{:?}",
        errors(&o)
    );
}
