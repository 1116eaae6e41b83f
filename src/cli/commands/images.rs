//! `podhost images`, `podhost rmi REF` and `podhost gc`: the image store through the
//! daemon (`rmi` and `gc` say which store on stderr, and refuse a `--root-dir` that is
//! not the daemon's).

use std::path::Path;

use anyhow::Result;

use crate::api::client::Client;
use crate::cli::images::render_images;

/// `images`: the store's images as a table.
pub fn list(client: &Client) -> Result<i32> {
    let list: Vec<crate::image::ImageSummary> = client.get_json("/images")?;
    print!("{}", render_images(&list, chrono::Utc::now()));
    Ok(0)
}

/// `rmi REF`: refused (409) while a pod uses the image.
pub fn remove(client: &Client, reference: String, root_dir: Option<&Path>) -> Result<i32> {
    let target = super::store_target::through_daemon(client, root_dir)?;
    let body = serde_json::to_vec(&crate::api::types::PullRequest { reference })?;
    let a = client.request("POST", "/images/remove", Some(&body))?;
    let v: serde_json::Value = serde_json::from_slice(&a.body)?;
    println!(
        "Deleted: {} ({} bytes freed)",
        v["removed"].as_str().unwrap_or(""),
        v["bytes_freed"]
    );
    eprintln!("removed from {target}");
    Ok(0)
}

/// `gc`: a container GC pass and an image GC pass now; prints the daemon's report.
pub fn gc(client: &Client, root_dir: Option<&Path>) -> Result<i32> {
    let target = super::store_target::through_daemon(client, root_dir)?;
    let a = client.request("POST", "/gc", None)?;
    let v: serde_json::Value = serde_json::from_slice(&a.body)?;
    println!("{}", serde_json::to_string_pretty(&v)?);
    eprintln!("collected garbage in {target}, and that daemon's dead containers");
    Ok(0)
}
