//! The CNI operations on a whole config list, as libcni runs them: ADD through the
//! plugins in order (each gets the previous one's result), CHECK and DEL with the
//! cached final result (DEL in reverse order), STATUS and VERSION per plugin.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use super::CniError;
use super::exec::{Command, PodEnv, run_plugin};
use crate::model::cni::config::ConfigList;
use crate::model::cni::input::{RuntimeArgs, plugin_stdin};
use crate::model::cni::result::{CniResult, parse_result, parse_supported_versions};
use crate::model::cni::version::{SpecVersion, plugin_supports};

/// What every operation on a list needs.
pub struct Runner<'a> {
    pub bin_dirs: &'a [PathBuf],
    pub timeout: Duration,
}

impl Runner<'_> {
    /// ADD through every plugin; the final result, raw and typed.
    pub async fn add(
        &self,
        list: &ConfigList,
        pod: &PodEnv<'_>,
        rt: &RuntimeArgs,
    ) -> Result<(Value, CniResult), CniError> {
        let mut prev: Option<(Value, CniResult)> = None;
        for plugin in &list.plugins {
            let stdin = plugin_stdin(list, plugin, prev.as_ref().map(|p| &p.0), rt);
            let out = run_plugin(
                self.bin_dirs,
                &plugin.plugin_type,
                Command::Add,
                Some(pod),
                &stdin,
                self.timeout,
            )
            .await?;
            prev = Some(parse_result(&plugin.plugin_type, &out)?);
        }
        prev.ok_or_else(|| CniError::Internal("a config list without plugins".into()))
    }

    /// CHECK through every plugin with the cached result.
    pub async fn check(
        &self,
        list: &ConfigList,
        pod: &PodEnv<'_>,
        rt: &RuntimeArgs,
        cached: &Value,
    ) -> Result<(), CniError> {
        for plugin in &list.plugins {
            let stdin = plugin_stdin(list, plugin, Some(cached), rt);
            run_plugin(
                self.bin_dirs,
                &plugin.plugin_type,
                Command::Check,
                Some(pod),
                &stdin,
                self.timeout,
            )
            .await?;
        }
        Ok(())
    }

    /// DEL through every plugin in reverse order. Every plugin is asked even when one
    /// fails (each frees what it holds; DEL is idempotent, so a retry is harmless); the
    /// first failure is returned.
    pub async fn del(
        &self,
        list: &ConfigList,
        pod: &PodEnv<'_>,
        rt: &RuntimeArgs,
        cached: Option<&Value>,
    ) -> Result<(), CniError> {
        // Before 0.4.0 a DEL got no prevResult.
        let prev = cached.filter(|_| list.cni_version.at_least(SpecVersion::CHECK));
        let mut first_error = None;
        for plugin in list.plugins.iter().rev() {
            let stdin = plugin_stdin(list, plugin, prev, rt);
            let res = run_plugin(
                self.bin_dirs,
                &plugin.plugin_type,
                Command::Del,
                Some(pod),
                &stdin,
                self.timeout,
            )
            .await;
            match res {
                Ok(_) => {}
                // Spec error 3, "unknown container": there is nothing left to delete.
                Err(CniError::Plugin { code: Some(3), .. }) => {}
                Err(e) => {
                    tracing::warn!(plugin = %plugin.plugin_type, error = %e, "CNI DEL failed");
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// VERSION of every plugin: each must speak the list's cniVersion.
    pub async fn check_versions(&self, list: &ConfigList) -> Result<(), CniError> {
        for plugin in &list.plugins {
            let stdin = json!({ "cniVersion": list.cni_version_text });
            let out = run_plugin(
                self.bin_dirs,
                &plugin.plugin_type,
                Command::Version,
                None,
                &stdin,
                self.timeout,
            )
            .await?;
            let supported = parse_supported_versions(&plugin.plugin_type, &out)?;
            if !plugin_supports(&supported, list.cni_version) {
                return Err(CniError::UnsupportedVersion {
                    file: list.file.clone(),
                    plugin: plugin.plugin_type.clone(),
                    version: list.cni_version_text.clone(),
                    supported,
                });
            }
        }
        Ok(())
    }

    /// STATUS of every plugin (CNI 1.1): whether it is ready for ADDs. Skipped (Ok)
    /// when the list's version predates STATUS.
    pub async fn status(&self, list: &ConfigList) -> Result<(), CniError> {
        if !list.cni_version.at_least(SpecVersion::STATUS) {
            return Ok(());
        }
        for plugin in &list.plugins {
            let stdin = plugin_stdin(list, plugin, None, &RuntimeArgs::default());
            run_plugin(
                self.bin_dirs,
                &plugin.plugin_type,
                Command::Status,
                None,
                &stdin,
                self.timeout,
            )
            .await?;
        }
        Ok(())
    }
}

/// The netns to name in a DEL: the pinned path while it is still a network namespace,
/// else empty (the pod's namespace is gone; plugins then free only host-side state).
pub fn netns_for_del(netns: &Path) -> PathBuf {
    if crate::runtime::sandbox::is_ns_mount(netns) {
        netns.to_path_buf()
    } else {
        PathBuf::new()
    }
}
