//! The CNI operations on a whole config list, as libcni runs them: ADD through the
//! plugins in order (each gets the previous one's result), CHECK and DEL with the
//! cached final result (DEL in reverse order), STATUS and VERSION per plugin.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use super::CniError;
use super::exec::{Command, PodEnv, run_plugin};
use podhost_model::cni::config::ConfigList;
use podhost_model::cni::input::{RuntimeArgs, plugin_stdin};
use podhost_model::cni::result::{CniResult, parse_result, parse_supported_versions};
use podhost_model::cni::version::{SpecVersion, plugin_supports};

/// What every operation on a list needs.
pub struct Runner<'a> {
    pub bin_dirs: &'a [PathBuf],
    pub timeout: Duration,
}

impl Runner<'_> {
    /// ADD through every plugin; the final result, raw and typed. On failure, what a
    /// rollback needs: which plugin failed and the result of the one before it.
    /// `progress` is given each plugin's result but the last's before the next runs,
    /// and must have stored it (a failure to do so stops the ADD).
    pub async fn add<F, Fut>(
        &self,
        list: &ConfigList,
        pod: &PodEnv<'_>,
        rt: &RuntimeArgs,
        progress: F,
    ) -> Result<(Value, CniResult), AddFailure>
    where
        F: Fn(Value) -> Fut,
        Fut: std::future::Future<Output = Result<(), CniError>>,
    {
        let mut prev: Option<(Value, CniResult)> = None;
        for (index, plugin) in list.plugins.iter().enumerate() {
            if let Some((raw, _)) = prev.as_ref().filter(|_| index > 0)
                && let Err(e) = progress(raw.clone()).await
            {
                return Err(AddFailure {
                    error: e,
                    failed_index: index - 1,
                    partial: prev.map(|p| p.0),
                });
            }
            let stdin = plugin_stdin(list, plugin, prev.as_ref().map(|p| &p.0), rt);
            let fail = |error: CniError, prev: Option<(Value, CniResult)>| AddFailure {
                error,
                failed_index: index,
                partial: prev.map(|p| p.0),
            };
            let out = match run_plugin(
                self.bin_dirs,
                &plugin.plugin_type,
                Command::Add,
                Some(pod),
                &stdin,
                self.timeout,
            )
            .await
            {
                Ok(out) => out,
                Err(e) => return Err(fail(e, prev)),
            };
            match parse_result(&plugin.plugin_type, &out) {
                Ok(r) => prev = Some(r),
                Err(e) => return Err(fail(e.into(), prev)),
            }
        }
        prev.ok_or_else(|| AddFailure {
            error: CniError::Internal("a config list without plugins".into()),
            failed_index: 0,
            partial: None,
        })
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

    /// DEL through the first `upto` plugins (all of them for a teardown; those that ran
    /// for the rollback of a failed ADD) in reverse order. Every plugin is asked even
    /// when one fails (each frees what it holds; DEL is idempotent, so a retry is
    /// harmless); the first failure is returned. A failure equal to `rejected` (the same
    /// plugin failing with the same message as its ADD did) is not one: that plugin
    /// refuses its config and so made nothing.
    pub async fn del(
        &self,
        list: &ConfigList,
        upto: usize,
        pod: &PodEnv<'_>,
        rt: &RuntimeArgs,
        cached: Option<&Value>,
        rejected: Option<&CniError>,
    ) -> Result<(), CniError> {
        // Before 0.4.0 a DEL got no prevResult.
        let prev = cached.filter(|_| list.cni_version.at_least(SpecVersion::CHECK));
        let mut first_error = None;
        let upto = upto.min(list.plugins.len());
        for plugin in list.plugins[..upto].iter().rev() {
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
                Err(e) if same_refusal(&e, rejected) => {}
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
    if podhost_runtime::sandbox::is_ns_mount(netns) {
        netns.to_path_buf()
    } else {
        PathBuf::new()
    }
}

/// Why an ADD failed, with what its rollback needs.
#[derive(Debug)]
pub struct AddFailure {
    pub error: CniError,
    /// The plugin that failed (the ones after it never ran).
    pub failed_index: usize,
    /// The result of the plugin before it, if any.
    pub partial: Option<Value>,
}

/// Whether `del_error` is the plugin failing exactly as its ADD did (`add_error`).
fn same_refusal(del_error: &CniError, add_error: Option<&CniError>) -> bool {
    match (del_error, add_error) {
        (
            CniError::Plugin {
                plugin: p1,
                message: m1,
                ..
            },
            Some(CniError::Plugin {
                plugin: p2,
                message: m2,
                ..
            }),
        ) => p1 == p2 && m1 == m2,
        _ => false,
    }
}
