//! SIGHUP re-reads `--config`. The new file is checked as at start (mapped onto the
//! command line's flags, which still win); on any error the configuration in effect is
//! kept and a node event says why. On success the settings that can change while the
//! daemon runs are published on a `watch` of [`LiveSettings`], and each changed field
//! that needs a restart is named in a node event.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::watch;

use super::flags::DaemonFlags;
use super::kubelet_config::{ConfigFile, KubeletConfigError, apply, flag_of};
use super::sd_notify::Notifier;
use podhost_status::{EventKind, StatusStore};

/// The fields whose new value is applied without a restart: log rotation (new
/// containers' logs; the shims of running ones keep theirs), image GC (its next pass),
/// eviction (the manager's next look; a soft threshold's grace starts again when its
/// value changes).
pub const LIVE_FIELDS: &[&str] = &[
    "containerLogMaxSize",
    "containerLogMaxFiles",
    "imageGCHighThresholdPercent",
    "imageGCLowThresholdPercent",
    "imageMinimumGCAge",
    "imageMaximumGCAge",
    "evictionHard",
    "evictionSoft",
    "evictionSoftGracePeriod",
    "evictionMinimumReclaim",
    "evictionMaxPodGracePeriod",
    "evictionPressureTransitionPeriod",
];

/// What a reload can change while the daemon runs.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveSettings {
    pub log_rotation: podhost_logs::RotationPolicy,
    pub image_gc: podhost_image::gc::ImageGcPolicy,
    pub eviction: crate::eviction::EvictionSettings,
}

impl LiveSettings {
    pub fn of(cfg: &super::DaemonConfig) -> Self {
        Self {
            log_rotation: cfg.log_rotation,
            image_gc: cfg.gc.image.clone(),
            eviction: cfg.eviction.clone(),
        }
    }
}

/// `--config` as the daemon was started with it: enough to redo the mapping.
#[derive(Debug, Clone)]
pub struct ReloadSource {
    /// The flags as the command line gave them, before the file.
    pub cli_flags: DaemonFlags,
    /// The clap ids of the flags given on the command line.
    pub given: BTreeSet<String>,
    /// The global `--socket`.
    pub socket: PathBuf,
    /// The file as read at start.
    pub file: ConfigFile,
}

/// A reload that cannot be applied.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error(transparent)]
    File(#[from] KubeletConfigError),
    #[error("config file {path}: field {field}: {source}; fix the field in the file")]
    Field {
        path: PathBuf,
        field: String,
        #[source]
        source: Box<super::flags::FlagError>,
    },
    #[error("config file {path}: {source}")]
    Flags {
        path: PathBuf,
        #[source]
        source: Box<super::flags::FlagError>,
    },
}

/// The daemon's settings from the command line and the file: `cli_flags` with the
/// file's fields applied where no flag was given. The error names the file's field
/// when a flag's check failed on a value that came from the file.
pub fn resolve(
    cli_flags: &DaemonFlags,
    given: &BTreeSet<String>,
    socket: PathBuf,
    file: &ConfigFile,
) -> Result<(DaemonFlags, super::DaemonConfig), ReloadError> {
    let mut flags = cli_flags.clone();
    apply(file, &mut flags, given)?;
    let cfg = flags.clone().into_config(socket).map_err(|source| {
        match file.field_behind(&source.to_string(), given) {
            Some(field) => ReloadError::Field {
                path: file.path.clone(),
                field,
                source: Box::new(source),
            },
            None => ReloadError::Flags {
                path: file.path.clone(),
                source: Box::new(source),
            },
        }
    })?;
    Ok((flags, cfg))
}

/// What a new file changes against the old, by field.
#[derive(Debug, Default, PartialEq)]
pub struct Changes {
    /// Applied now.
    pub live: Vec<String>,
    /// Changed, but in effect only after a restart.
    pub restart: Vec<String>,
    /// Changed, but a command-line flag overrides them.
    pub overridden: Vec<String>,
}

/// The fields of `new` that differ from `latest` (live fields) or from `started` (the
/// others: what is in effect until a restart).
pub fn changes(
    started: &ConfigFile,
    latest: &ConfigFile,
    new: &ConfigFile,
    given: &BTreeSet<String>,
) -> Changes {
    let mut out = Changes::default();
    let names: BTreeSet<&String> = started
        .values
        .keys()
        .chain(latest.values.keys())
        .chain(new.values.keys())
        .collect();
    for name in names {
        let live = LIVE_FIELDS.contains(&name.as_str());
        let before = if live { latest } else { started };
        if before.values.get(name) == new.values.get(name) {
            continue;
        }
        let list = if flag_of(name).is_some_and(|f| given.contains(f)) {
            &mut out.overridden
        } else if live {
            &mut out.live
        } else {
            &mut out.restart
        };
        list.push(name.clone());
    }
    out
}

/// Where a reload's live settings go.
pub struct LiveTargets {
    pub settings: watch::Sender<LiveSettings>,
    /// The pod workers' copy (new containers' log rotation).
    pub log_rotation: watch::Sender<podhost_logs::RotationPolicy>,
    pub gc: Arc<crate::gc::runner::GcRunner>,
    /// The eviction manager's thresholds and periods.
    pub eviction: watch::Sender<crate::eviction::EvictionSettings>,
}

impl LiveTargets {
    fn publish(&self, live: LiveSettings) {
        self.log_rotation.send_if_modified(|r| {
            let changed = *r != live.log_rotation;
            *r = live.log_rotation;
            changed
        });
        self.gc.set_image_policy(live.image_gc.clone());
        self.eviction.send_if_modified(|e| {
            let changed = *e != live.eviction;
            *e = live.eviction.clone();
            changed
        });
        self.settings.send_if_modified(|s| {
            let changed = *s != live;
            *s = live;
            changed
        });
    }
}

/// Reports the start-up file's unimplemented fields once (a warning line and one node
/// event) and the fields a flag overrides.
pub fn report_at_start(source: &ReloadSource, store: &StatusStore) {
    let file = &source.file;
    if !file.unsupported.is_empty() {
        store.node_event(
            EventKind::Warning,
            "UnsupportedConfigField",
            format!(
                "config file {}: podhost does not implement these fields and ignores them: {}",
                file.path.display(),
                file.unsupported_summary()
            ),
        );
    }
    let overridden = file.overridden(&source.given);
    if !overridden.is_empty() {
        tracing::info!(
            file = %file.path.display(),
            fields = overridden.join(", "),
            "command-line flags override these fields of the config file"
        );
    }
}

/// Handles SIGHUP until the daemon stops. Each one is bracketed by RELOADING=1 and
/// READY=1 to the service manager (what `Type=notify-reload` waits for), with or
/// without `--config`.
pub async fn run(
    mut hangups: tokio::signal::unix::Signal,
    source: Option<ReloadSource>,
    store: Arc<StatusStore>,
    targets: LiveTargets,
    notifier: Option<Arc<Notifier>>,
) {
    let mut latest = source.as_ref().map(|s| s.file.clone());
    while hangups.recv().await.is_some() {
        if let Some(n) = &notifier {
            n.reloading();
        }
        match (&source, &latest) {
            (Some(source), Some(old)) => match reload_once(source, old, &store, &targets) {
                Ok(new) => latest = Some(new),
                Err(e) => store.node_event(
                    EventKind::Warning,
                    "ConfigReloadFailed",
                    format!("{e}; the configuration in effect is kept"),
                ),
            },
            _ => tracing::info!(
                "SIGHUP: the daemon was started without --config; nothing to re-read"
            ),
        }
        if let Some(n) = &notifier {
            n.send("READY=1");
        }
    }
}

fn reload_once(
    source: &ReloadSource,
    latest: &ConfigFile,
    store: &StatusStore,
    targets: &LiveTargets,
) -> Result<ConfigFile, ReloadError> {
    let path = &source.file.path;
    let new = ConfigFile::load(path)?;
    let (_, cfg) = resolve(
        &source.cli_flags,
        &source.given,
        source.socket.clone(),
        &new,
    )?;
    let changes = changes(&source.file, latest, &new, &source.given);
    targets.publish(LiveSettings::of(&cfg));
    let mut message = format!("re-read config file {}", path.display());
    message.push_str(&match changes.live.is_empty() {
        true => ": no live setting changed".to_string(),
        false => format!(": applied {}", changes.live.join(", ")),
    });
    if !changes.overridden.is_empty() {
        message.push_str(&format!(
            "; not applied, a command-line flag overrides them: {}",
            changes.overridden.join(", ")
        ));
    }
    store.node_event(EventKind::Normal, "ConfigReloaded", message);
    if !changes.restart.is_empty() {
        store.node_event(
            EventKind::Warning,
            "ConfigChangeNeedsRestart",
            format!(
                "config file {}: {} changed; in effect once the daemon restarts (systemctl \
                 restart podhost; containers keep running)",
                path.display(),
                changes.restart.join(", ")
            ),
        );
    }
    let new_unsupported: Vec<_> = new
        .unsupported
        .iter()
        .filter(|u| !latest.unsupported.contains(u))
        .map(|(name, why)| format!("{name} ({why})"))
        .collect();
    if !new_unsupported.is_empty() {
        store.node_event(
            EventKind::Warning,
            "UnsupportedConfigField",
            format!(
                "config file {}: podhost does not implement these fields and ignores them: {}",
                path.display(),
                new_unsupported.join(", ")
            ),
        );
    }
    Ok(new)
}
