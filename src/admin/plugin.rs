//! The plugin interface: a plugin serves every request under one mount point of the admin API
//! (`/api/v1/plugins/<name>`), behind the same bearer-token check as the rest of the API.

use std::sync::Arc;

use super::http::{Request, Response};

/// The mount points plugins can take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mount {
    /// `/api/v1/plugins/accelerator`.
    Accelerator,
    /// `/api/v1/plugins/guard`.
    Guard,
}

impl Mount {
    /// Every mount point.
    pub const ALL: &'static [Mount] = &[Mount::Accelerator, Mount::Guard];

    /// The plugin's name.
    pub fn name(self) -> &'static str {
        match self {
            Mount::Accelerator => "accelerator",
            Mount::Guard => "guard",
        }
    }

    /// The path prefix the plugin serves.
    pub fn path(self) -> &'static str {
        match self {
            Mount::Accelerator => "/api/v1/plugins/accelerator",
            Mount::Guard => "/api/v1/plugins/guard",
        }
    }

    /// Whether `path` is the mount point or below it (`/api/v1/plugins/guardian` is not).
    pub fn matches(self, path: &str) -> bool {
        path.strip_prefix(self.path()).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    }
}

/// What a plugin implements to serve its mount point. Handlers run on the admin thread: they
/// must answer promptly and must not block on the data plane.
pub trait Plugin: Send + Sync {
    /// Where the plugin is mounted.
    fn mount(&self) -> Mount;

    /// Answers a request under the mount point; `rest` is the path after it (`""` or `/...`).
    fn handle(&self, req: &Request, rest: &str) -> Response;
}

/// The registered plugins, at most one per mount point.
#[derive(Default, Clone)]
pub struct Plugins {
    list: Vec<Arc<dyn Plugin>>,
}

impl Plugins {
    /// Registers `plugin`; refused (returned) when its mount point is taken.
    pub fn register(&mut self, plugin: Arc<dyn Plugin>) -> Result<(), Arc<dyn Plugin>> {
        if self.get(plugin.mount()).is_some() {
            return Err(plugin);
        }
        self.list.push(plugin);
        Ok(())
    }

    /// The plugin at `mount`, if any.
    pub fn get(&self, mount: Mount) -> Option<&Arc<dyn Plugin>> {
        self.list.iter().find(|p| p.mount() == mount)
    }
}
