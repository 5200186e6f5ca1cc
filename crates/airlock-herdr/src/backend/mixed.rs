//! Both backends at once, for the actions that walk every mapping (list, prune, the worktree
//! hook, the overlay) when mappings of both exist. A name is airlock's when airlock holds a
//! record for it (host-trusted), else sbx's.

use super::airlock::AirlockCli;
use super::{BackendStatus, CreateRequest, ExecRequest, PortMapping, SandboxBackend, SandboxInfo};
use crate::error::Result;
use crate::proc::Captured;

pub struct Mixed {
    pub sbx: Box<dyn SandboxBackend>,
    pub airlock: AirlockCli,
}

impl Mixed {
    fn of(&self, name: &str) -> &dyn SandboxBackend {
        match self.airlock.records.load(name) {
            Ok(Some(_)) => &self.airlock,
            _ => self.sbx.as_ref(),
        }
    }
}

impl SandboxBackend for Mixed {
    fn list(&self) -> Result<Vec<SandboxInfo>> {
        let mut all = self.airlock.list()?;
        all.extend(self.sbx.list()?);
        Ok(all)
    }
    fn create(&self, request: &CreateRequest) -> Result<Captured> {
        self.sbx.create(request)
    }
    fn exec(&self, request: &ExecRequest, slow: bool) -> Result<Captured> {
        self.of(&request.name).exec(request, slow)
    }
    fn attach(&self, request: &ExecRequest, host_env: &[(String, String)]) -> Result<i32> {
        self.of(&request.name).attach(request, host_env)
    }
    fn stop(&self, name: &str) -> Result<()> {
        self.of(name).stop(name)
    }
    fn remove(&self, name: &str) -> Result<()> {
        self.of(name).remove(name)
    }
    fn ports(&self, name: &str) -> Result<Vec<PortMapping>> {
        self.of(name).ports(name)
    }
    fn copy(&self, source: &str, destination: &str) -> Result<()> {
        let name = source.split_once(':').map_or(source, |(n, _)| n);
        self.of(name).copy(source, destination)
    }
    fn status(&self) -> Result<BackendStatus> {
        self.sbx.status()
    }
    fn check(&self) -> Result<()> {
        self.sbx.check()
    }
}
