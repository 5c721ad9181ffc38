//! Fork lineage: forking children, and drawing a family as a tree.

use std::collections::BTreeMap;

use agentsessions_cli::output::session_json;
use agentsessions_client::{Client, ForkOptions, uid_of};
use agentsessions_wire::pb;
use serde::Serialize;

use crate::error::CliError;
use crate::out::Out;

pub(crate) async fn fork(
    client: &mut Client,
    out: &mut Out,
    uid: &str,
    at: Option<i64>,
    count: i32,
    names: Vec<String>,
) -> Result<(), CliError> {
    let children = client
        .fork(
            uid,
            ForkOptions {
                at_seq: at.unwrap_or(0),
                count,
                names,
                labels: BTreeMap::new(),
            },
        )
        .await?;
    for child in children {
        let name = child.metadata.as_ref().map_or("", |m| m.name.as_str());
        out.either(&session_json(&child), || {
            format!(
                "child {} parent={} fork_seq={} name={name}",
                uid_of(&child),
                child.parent_uid,
                child.fork_seq
            )
        })?;
    }
    Ok(())
}

/// One session of a family with its children (`tree --json`).
#[derive(Serialize)]
struct Node<'a> {
    uid: &'a str,
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    parent_uid: &'a str,
    fork_seq: i64,
    last_seq: i64,
    /// The session the tree was asked for.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    asked: bool,
    children: Vec<Node<'a>>,
}

/// Children by parent uid, each list in fork order.
type Children = BTreeMap<String, Vec<pb::Session>>;

pub(crate) async fn tree(client: &mut Client, out: &mut Out, uid: &str) -> Result<(), CliError> {
    let mut root = client.get(uid).await?;
    while !root.parent_uid.is_empty() {
        match client.get(&root.parent_uid).await {
            Ok(parent) => root = parent,
            Err(e) if e.code() == tonic::Code::NotFound => break,
            Err(e) => return Err(e.into()),
        }
    }
    let mut children = Children::new();
    for session in client.list(0).await? {
        if !session.parent_uid.is_empty() {
            children
                .entry(session.parent_uid.clone())
                .or_default()
                .push(session);
        }
    }
    for list in children.values_mut() {
        list.sort_by(|a, b| (a.fork_seq, uid_of(a)).cmp(&(b.fork_seq, uid_of(b))));
    }
    if out.json() {
        return out.value(&node(&children, &root, uid));
    }
    let marker = if uid_of(&root) == uid { "  <" } else { "" };
    out.line(&label(&root, marker))?;
    draw(out, &children, &root, "", uid)
}

fn node<'a>(children: &'a Children, session: &'a pb::Session, asked: &str) -> Node<'a> {
    Node {
        uid: uid_of(session),
        name: session.metadata.as_ref().map_or("", |m| m.name.as_str()),
        parent_uid: &session.parent_uid,
        fork_seq: session.fork_seq,
        last_seq: session.last_seq,
        asked: uid_of(session) == asked,
        children: children
            .get(uid_of(session))
            .map(|list| list.iter().map(|c| node(children, c, asked)).collect())
            .unwrap_or_default(),
    }
}

fn label(session: &pb::Session, marker: &str) -> String {
    let name = session.metadata.as_ref().map_or("", |m| m.name.as_str());
    let fork = if session.parent_uid.is_empty() {
        String::new()
    } else {
        format!(" @{}", session.fork_seq)
    };
    let name = if name.is_empty() {
        String::new()
    } else {
        format!(" ({name})")
    };
    format!(
        "{}{fork}{name} last_seq={}{marker}",
        uid_of(session),
        session.last_seq
    )
}

fn draw(
    out: &mut Out,
    children: &Children,
    session: &pb::Session,
    prefix: &str,
    asked: &str,
) -> Result<(), CliError> {
    let Some(list) = children.get(uid_of(session)) else {
        return Ok(());
    };
    for (i, child) in list.iter().enumerate() {
        let last = i + 1 == list.len();
        let marker = if uid_of(child) == asked { "  <" } else { "" };
        out.line(&format!(
            "{prefix}{}{}",
            if last { "└── " } else { "├── " },
            label(child, marker)
        ))?;
        let deeper = format!("{prefix}{}", if last { "    " } else { "│   " });
        draw(out, children, child, &deeper, asked)?;
    }
    Ok(())
}
