//! `pardis datasets`: the manifest of public data sets, where each is found, and verification.

use crate::output;
use anyhow::Context;
use pardis_datasets::{DataRoots, Dataset, Manifest};
use serde::Serialize;

/// Arguments of `pardis datasets`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// List every data set with its found/missing status and where it was found.
    List {
        /// Only data sets of this kind (graph, matrix, tabular, text, image, model).
        #[arg(long)]
        kind: Option<String>,
        /// Also check size and sha256 of every file found (reads all files).
        #[arg(long)]
        verify: bool,
        /// Emit machine-readable JSON on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Print the path of one data set (verified), for use in scripts.
    Path {
        /// Data set name as in the manifest.
        name: String,
    },
}

#[derive(Debug, Serialize)]
struct Row<'a> {
    name: &'a str,
    kind: &'a str,
    format: &'a str,
    size: u64,
    found: bool,
    origin: Option<String>,
    path: Option<String>,
    verified: Option<bool>,
    url: &'a str,
    license: &'a str,
}

fn row<'a>(d: &'a Dataset, roots: &DataRoots, verify: bool) -> Row<'a> {
    // Verifying: the first copy that passes, as `datasets path` uses; else the first copy.
    let (loc, verified) = if !verify {
        (roots.locate(d), None)
    } else if let Ok(l) = roots.require_verified(d) {
        (Some(l), Some(true))
    } else {
        let l = roots.locate(d);
        let v = l.as_ref().map(|_| false);
        (l, v)
    };
    Row {
        name: &d.name,
        kind: &d.kind,
        format: &d.format,
        size: d.size,
        found: loc.is_some(),
        origin: loc.as_ref().map(|l| l.origin.to_string()),
        path: loc.as_ref().map(|l| l.path.display().to_string()),
        verified,
        url: &d.url,
        license: &d.license,
    }
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let manifest = Manifest::builtin();
    let roots = DataRoots::from_env();
    match args.action {
        Action::List { kind, verify, json } => {
            if let Some(k) = kind.as_deref() {
                let mut kinds: Vec<&str> =
                    manifest.datasets.iter().map(|d| d.kind.as_str()).collect();
                kinds.sort_unstable();
                kinds.dedup();
                if !kinds.contains(&k) {
                    anyhow::bail!("unknown kind `{k}`; the manifest has: {}", kinds.join(", "));
                }
            }
            let rows: Vec<Row<'_>> = manifest
                .datasets
                .iter()
                .filter(|d| kind.as_deref().is_none_or(|k| d.kind == k))
                .map(|d| row(d, &roots, verify))
                .collect();
            let mismatched = rows.iter().filter(|r| r.verified == Some(false)).count();
            let verdict = || -> anyhow::Result<()> {
                if mismatched > 0 {
                    anyhow::bail!("{mismatched} data set(s) failed verification (size or sha256)");
                }
                Ok(())
            };
            if json {
                println!("{}", serde_json::to_string_pretty(&rows)?);
                return verdict();
            }
            let mut t = output::table(["name", "kind", "size", "status", "where"]);
            for r in &rows {
                let status = match (r.found, r.verified) {
                    (false, _) => "missing",
                    (true, Some(false)) => "CHECKSUM MISMATCH",
                    (true, Some(true)) => "found, verified",
                    (true, None) => "found",
                };
                t.add_row([
                    r.name.to_string(),
                    r.kind.to_string(),
                    output::bytes(r.size),
                    status.to_string(),
                    r.origin.clone().unwrap_or_else(|| "-".into()),
                ]);
            }
            println!("{t}");
            let found = rows.iter().filter(|r| r.found).count();
            println!(
                "{found} of {} data sets found; searched, in order:",
                rows.len()
            );
            for (origin, dir) in roots.dirs() {
                println!("  {origin}: {}", dir.display());
            }
            if found < rows.len() {
                println!("missing ones can be downloaded with scripts/fetch-datasets.sh (needs internet)");
            }
            verdict()
        }
        Action::Path { name } => {
            let d = manifest.get(&name)?;
            let loc = roots
                .require_verified(d)
                .with_context(|| format!("data set `{name}`: no copy passes verification"))?;
            println!("{}", loc.path.display());
            Ok(())
        }
    }
}
