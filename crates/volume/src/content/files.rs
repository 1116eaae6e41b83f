//! A content volume's payload from the pod spec and the config objects, as the
//! kubelet's configmap, secret, downwardapi and projected plugins build it
//! (MakePayload, CollectData).

use k8s_openapi::api::core::v1::{DownwardAPIVolumeFile, KeyToPath, Pod, Volume};

use super::{ContentError, DEFAULT_MODE, FileSet, ProjectedFile};
use podhost_model::downward::{DownwardInputs, FieldScope, field_value, resource_value};
use podhost_model::env::ConfigLookup;

/// Whether `volume` is one [`volume_files`] fills.
pub fn is_content_volume(volume: &Volume) -> bool {
    volume.config_map.is_some()
        || volume.secret.is_some()
        || volume.downward_api.is_some()
        || volume.projected.is_some()
}

/// The files of a configMap, secret, downwardAPI or projected volume. A missing object
/// or key is an error unless the source is `optional` (then the object is empty, the
/// key skipped); paths are checked as the kubelet's writer checks them.
pub fn volume_files(
    volume: &Volume,
    pod: &Pod,
    objects: &dyn ConfigLookup,
    inputs: &DownwardInputs,
) -> Result<FileSet, ContentError> {
    let b = Builder {
        volume: &volume.name,
        pod,
        namespace: pod.metadata.namespace.as_deref().unwrap_or("default"),
        objects,
        inputs,
    };
    let mut files = FileSet::new();
    if let Some(cm) = &volume.config_map {
        let mode = b.mode("defaultMode", cm.default_mode)?;
        b.config_map(
            &cm.name,
            cm.items.as_deref(),
            mode,
            cm.optional == Some(true),
            &mut files,
        )?;
    } else if let Some(s) = &volume.secret {
        let mode = b.mode("defaultMode", s.default_mode)?;
        let name = s.secret_name.as_deref().unwrap_or_default();
        b.secret(
            name,
            s.items.as_deref(),
            mode,
            s.optional == Some(true),
            &mut files,
        )?;
    } else if let Some(d) = &volume.downward_api {
        let mode = b.mode("defaultMode", d.default_mode)?;
        b.downward(d.items.as_deref().unwrap_or_default(), mode, &mut files)?;
    } else if let Some(p) = &volume.projected {
        let mode = b.mode("defaultMode", p.default_mode)?;
        for source in p.sources.iter().flatten() {
            if let Some(cm) = &source.config_map {
                b.config_map(
                    &cm.name,
                    cm.items.as_deref(),
                    mode,
                    cm.optional == Some(true),
                    &mut files,
                )?;
            } else if let Some(s) = &source.secret {
                b.secret(
                    &s.name,
                    s.items.as_deref(),
                    mode,
                    s.optional == Some(true),
                    &mut files,
                )?;
            } else if let Some(d) = &source.downward_api {
                b.downward(d.items.as_deref().unwrap_or_default(), mode, &mut files)?;
            } else if let (Some(t), true) = (&source.service_account_token, objects.issues_tokens())
            {
                b.token(t, mode, &mut files)?;
            } else {
                let source_kind = if source.service_account_token.is_some() {
                    "serviceAccountToken"
                } else if source.cluster_trust_bundle.is_some() {
                    "clusterTrustBundle"
                } else {
                    "podCertificate"
                };
                return Err(ContentError::Unavailable {
                    volume: volume.name.clone(),
                    source_kind,
                });
            }
        }
    } else {
        return Err(ContentError::NotContent {
            volume: volume.name.clone(),
        });
    }
    Ok(files)
}

struct Builder<'a> {
    volume: &'a str,
    pod: &'a Pod,
    namespace: &'a str,
    objects: &'a dyn ConfigLookup,
    inputs: &'a DownwardInputs,
}

impl Builder<'_> {
    fn mode(&self, path: &str, mode: Option<i32>) -> Result<u32, ContentError> {
        match mode {
            None => Ok(DEFAULT_MODE),
            Some(m) => u32::try_from(m)
                .ok()
                .filter(|m| *m <= 0o777)
                .ok_or_else(|| ContentError::BadMode {
                    volume: self.volume.into(),
                    path: path.into(),
                    mode: m,
                }),
        }
    }

    /// A projected service account token: the one issued for the pod, at its path.
    fn token(
        &self,
        source: &k8s_openapi::api::core::v1::ServiceAccountTokenProjection,
        mode: u32,
        files: &mut FileSet,
    ) -> Result<(), ContentError> {
        let token = podhost_model::config_refs::token_ref(self.pod, source);
        let Some(jwt) = self.objects.service_account_token(&token) else {
            return Err(ContentError::TokenNotIssued {
                volume: self.volume.into(),
                token: token.to_string(),
            });
        };
        self.add(files, &source.path, jwt.as_bytes().to_vec(), mode)
    }

    /// Adds one file; two sources giving the same path is the API server's
    /// "conflicting duplicate paths".
    fn add(
        &self,
        files: &mut FileSet,
        path: &str,
        data: Vec<u8>,
        mode: u32,
    ) -> Result<(), ContentError> {
        if let Some(reason) = super::atomic::path_problem(path) {
            return Err(ContentError::BadPath {
                volume: self.volume.into(),
                path: path.into(),
                reason,
            });
        }
        if files
            .insert(path.to_string(), ProjectedFile { data, mode })
            .is_some()
        {
            return Err(ContentError::BadPath {
                volume: self.volume.into(),
                path: path.into(),
                reason: "conflicting duplicate paths".into(),
            });
        }
        Ok(())
    }

    /// `entries`: every key of the object with its bytes (`None`: there is no such
    /// object). With `items`, only those keys, at their paths and modes.
    #[allow(clippy::too_many_arguments)]
    fn keyed(
        &self,
        kind: &'static str,
        name: &str,
        entries: Option<Vec<(String, Vec<u8>)>>,
        items: Option<&[KeyToPath]>,
        mode: u32,
        optional: bool,
        files: &mut FileSet,
    ) -> Result<(), ContentError> {
        let Some(entries) = entries else {
            if optional {
                return Ok(());
            }
            let (volume, name) = (self.volume.into(), name.into());
            return Err(if kind == "secret" {
                ContentError::SecretNotFound {
                    volume,
                    name,
                    hint: self.objects.missing_hint(),
                }
            } else {
                ContentError::ConfigMapNotFound {
                    volume,
                    name,
                    hint: self.objects.missing_hint(),
                }
            });
        };
        let Some(items) = items.filter(|i| !i.is_empty()) else {
            for (key, data) in entries {
                self.add(files, &key, data, mode)?;
            }
            return Ok(());
        };
        for item in items {
            let Some((_, data)) = entries.iter().find(|(k, _)| *k == item.key) else {
                if optional {
                    continue;
                }
                return Err(ContentError::MissingKey {
                    volume: self.volume.into(),
                    kind,
                    namespace: self.namespace.into(),
                    name: name.into(),
                    key: item.key.clone(),
                });
            };
            let mode = match item.mode {
                Some(m) => self.mode(&item.path, Some(m))?,
                None => mode,
            };
            self.add(files, &item.path, data.clone(), mode)?;
        }
        Ok(())
    }

    fn config_map(
        &self,
        name: &str,
        items: Option<&[KeyToPath]>,
        mode: u32,
        optional: bool,
        files: &mut FileSet,
    ) -> Result<(), ContentError> {
        let entries = self.objects.config_map(self.namespace, name).map(|cm| {
            cm.data
                .iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.clone().into_bytes()))
                .chain(
                    cm.binary_data
                        .iter()
                        .flatten()
                        .map(|(k, v)| (k.clone(), v.0.clone())),
                )
                .collect()
        });
        self.keyed("configmap", name, entries, items, mode, optional, files)
    }

    fn secret(
        &self,
        name: &str,
        items: Option<&[KeyToPath]>,
        mode: u32,
        optional: bool,
        files: &mut FileSet,
    ) -> Result<(), ContentError> {
        let entries = self.objects.secret(self.namespace, name).map(|s| {
            s.data
                .iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.0.clone()))
                .collect()
        });
        self.keyed("secret", name, entries, items, mode, optional, files)
    }

    fn downward(
        &self,
        items: &[DownwardAPIVolumeFile],
        mode: u32,
        files: &mut FileSet,
    ) -> Result<(), ContentError> {
        for item in items {
            let err = |source| ContentError::Downward {
                volume: self.volume.into(),
                path: item.path.clone(),
                source,
            };
            let value = if let Some(sel) = &item.field_ref {
                field_value(sel, self.pod, self.inputs, FieldScope::Volume).map_err(err)?
            } else if let Some(sel) = &item.resource_field_ref {
                // A volume item must name its container (there is no "this container").
                resource_value(sel, self.pod, None, self.inputs).map_err(err)?
            } else {
                String::new()
            };
            let mode = match item.mode {
                Some(m) => self.mode(&item.path, Some(m))?,
                None => mode,
            };
            self.add(files, &item.path, value.into_bytes(), mode)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
