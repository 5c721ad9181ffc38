//! Canonical writers for the resource messages that are hashed or stored canonically: `Session`
//! (`session.proto`) with everything it holds, and `HarnessSpec` (`harness_registry.proto`),
//! whose canonical bytes give the registry's `spec_digest`.

use super::Canonical;
use super::fields::{boolean, enumeration, int64, member, message, string, string_map};
use super::jcs::JcsWriter;
use crate::error::Result;
use crate::pb;

fn exec_state(v: i32) -> Option<&'static str> {
    pb::ExecState::try_from(v).ok().map(|s| s.as_str_name())
}

fn compute_state(v: i32) -> Option<&'static str> {
    pb::ComputeState::try_from(v).ok().map(|s| s.as_str_name())
}

fn deletion_state(v: i32) -> Option<&'static str> {
    pb::DeletionState::try_from(v).ok().map(|s| s.as_str_name())
}

fn resumability(v: i32) -> Option<&'static str> {
    pb::Resumability::try_from(v).ok().map(|r| r.as_str_name())
}

impl Canonical for pb::Session {
    fn write_canonical(&self, w: &mut JcsWriter) -> Result<()> {
        w.begin_object();
        string_map(w, "annotations", &self.annotations);
        message(w, "compute", self.compute.as_ref())?;
        enumeration(w, "compute_state", self.compute_state, compute_state);
        enumeration(w, "deletion_state", self.deletion_state, deletion_state);
        enumeration(w, "exec_state", self.exec_state, exec_state);
        int64(w, "fork_seq", self.fork_seq);
        string(w, "harness", &self.harness);
        message(w, "identity", self.identity.as_ref())?;
        string_map(w, "labels", &self.labels);
        int64(w, "last_seq", self.last_seq);
        message(w, "metadata", self.metadata.as_ref())?;
        string(w, "model", &self.model);
        message(w, "origin", self.origin.as_ref())?;
        message(w, "owner", self.owner.as_ref())?;
        string(w, "parent_uid", &self.parent_uid);
        message(w, "pending_approval", self.pending_approval.as_ref())?;
        message(w, "usage", self.usage.as_ref())?;
        w.end_object();
        Ok(())
    }
}

impl Canonical for pb::UsageTotals {
    fn write_canonical(&self, w: &mut JcsWriter) -> Result<()> {
        w.begin_object();
        int64(w, "cached_input_tokens", self.cached_input_tokens);
        int64(w, "input_tokens", self.input_tokens);
        int64(w, "output_tokens", self.output_tokens);
        int64(w, "reasoning_tokens", self.reasoning_tokens);
        w.end_object();
        Ok(())
    }
}

impl Canonical for pb::CallerIdentity {
    fn write_canonical(&self, w: &mut JcsWriter) -> Result<()> {
        w.begin_object();
        string(w, "issuer", &self.issuer);
        string(w, "subject", &self.subject);
        w.end_object();
        Ok(())
    }
}

impl Canonical for pb::ComputeRef {
    fn write_canonical(&self, w: &mut JcsWriter) -> Result<()> {
        w.begin_object();
        string_map(w, "attributes", &self.attributes);
        message(w, "capabilities", self.capabilities.as_ref())?;
        int64(w, "fence_token", self.fence_token);
        string(w, "runtime", &self.runtime);
        message(w, "snapshot", self.snapshot.as_ref())?;
        string(w, "worker", &self.worker);
        w.end_object();
        Ok(())
    }
}

impl Canonical for pb::SnapshotRef {
    fn write_canonical(&self, w: &mut JcsWriter) -> Result<()> {
        w.begin_object();
        string(w, "external_uri", &self.external_uri);
        string(w, "local", &self.local);
        boolean(w, "memory", self.memory);
        boolean(w, "sealed", self.sealed);
        w.end_object();
        Ok(())
    }
}

impl Canonical for pb::RuntimeCapabilities {
    fn write_canonical(&self, w: &mut JcsWriter) -> Result<()> {
        w.begin_object();
        boolean(w, "attest", self.attest);
        boolean(w, "cow_fork", self.cow_fork);
        boolean(w, "gpu_state", self.gpu_state);
        boolean(w, "memory_snapshot", self.memory_snapshot);
        w.end_object();
        Ok(())
    }
}

impl Canonical for pb::HarnessSpec {
    fn write_canonical(&self, w: &mut JcsWriter) -> Result<()> {
        use pb::harness_spec::Placement;
        w.begin_object();
        message(w, "capabilities", self.capabilities.as_ref())?;
        string(w, "descriptor_id", &self.descriptor_id);
        match &self.placement {
            None => {}
            Some(Placement::Remote(p)) => member(w, "remote", p)?,
            Some(Placement::Substrate(p)) => member(w, "substrate", p)?,
        }
        w.end_object();
        Ok(())
    }
}

impl Canonical for pb::RemotePlacement {
    fn write_canonical(&self, w: &mut JcsWriter) -> Result<()> {
        w.begin_object();
        string(w, "address", &self.address);
        w.end_object();
        Ok(())
    }
}

impl Canonical for pb::SubstratePlacement {
    fn write_canonical(&self, w: &mut JcsWriter) -> Result<()> {
        w.begin_object();
        string(w, "atespace", &self.atespace);
        string(w, "template", &self.template);
        w.end_object();
        Ok(())
    }
}

impl Canonical for pb::Capabilities {
    fn write_canonical(&self, w: &mut JcsWriter) -> Result<()> {
        w.begin_object();
        boolean(w, "fork_safe", self.fork_safe);
        boolean(w, "reasoning_replay", self.reasoning_replay);
        boolean(w, "requires_gpu", self.requires_gpu);
        enumeration(w, "resumability", self.resumability, resumability);
        boolean(w, "streaming", self.streaming);
        w.end_object();
        Ok(())
    }
}
