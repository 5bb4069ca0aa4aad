//! The `baton` binary: parse, set up logging, run, map errors to exit codes.

use baton::cli::{Cli, Command, PipelineArgs};
use baton::error::Error;
use baton::replay::{self, AtEof, Options};
use baton::sink::JsonlSink;
use baton::{config, scan_view};
use clap::Parser;
use std::io::{self, Write};
use std::process::ExitCode;

/// jemalloc, with its background thread: it hands pages freed by any thread back to the
/// system within seconds. glibc's malloc keeps what a burst left in each thread's arena
/// (the first save of every file's state after a first history read, the first `status`
/// table), which at 10,000 sessions stayed resident as a third of the daemon's memory.
/// The `system-alloc` feature leaves it out, for a heap profiler that sees only the
/// system's malloc (`benches/heap_idle.py`).
#[cfg(not(feature = "system-alloc"))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    baton::logging::init(match cli.command {
        Command::Run(_) => "info",
        _ => "warn",
    });
    let systemd = match cli.command {
        // `unit` and `service` have their own errors and exit codes (`baton service --help`).
        Command::Unit => baton::service_cmd::print_unit(&mut io::stdout()).map(|()| 0),
        Command::Service(args) => baton::service_cmd::main(&args, &mut io::stdout()),
        command => return finish(run(command)),
    };
    match systemd {
        Ok(code) => ExitCode::from(code),
        Err(baton::service_cmd::Error::Output(io)) if io.kind() == io::ErrorKind::BrokenPipe => {
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("baton: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

fn finish(result: Result<(), Error>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if let Error::Output(io) = &e
                && io.kind() == io::ErrorKind::BrokenPipe
            {
                return ExitCode::SUCCESS;
            }
            if !matches!(e, Error::ProblemsFound) {
                eprintln!("baton: {e}");
            }
            ExitCode::from(e.exit_code())
        }
    }
}

fn options(p: &PipelineArgs) -> Options {
    Options {
        settle_ms: p.settle,
        max_line: p.max_line_bytes,
        seen_capacity: baton::reduce::dedup_capacity(),
        threads: 0,
    }
}

fn run(command: Command) -> Result<(), Error> {
    match command {
        Command::Replay(args) => {
            let files = replay::collect(&args.paths, args.pipeline.provider)?;
            let stdout = io::stdout();
            let mut sink = JsonlSink::new(io::BufWriter::new(stdout.lock()));
            replay::run(&files, &options(&args.pipeline), AtEof::RunOn, |ev| {
                sink.write(ev).map_err(Error::Output)
            })?;
            sink.flush().map_err(Error::Output)
        }
        Command::Run(args) => baton::daemon::main(*args),
        Command::Check(args) => {
            if baton::check::main(args)? {
                return Err(Error::ProblemsFound);
            }
            Ok(())
        }
        Command::Status(args) => {
            let socket = args.daemon.socket();
            let table = baton::people::Table::from_args(&args.table);
            if let Some(format) = args.format {
                let bar = baton::live::bar::Options {
                    format,
                    filter: table.filter,
                    recent_ms: args.recent,
                };
                return baton::live::bar::run(socket, &bar, args.watch, &mut io::stdout().lock());
            }
            if args.watch {
                return baton::live::watch(socket);
            }
            baton::client::status(
                socket.as_deref(),
                args.json,
                &table,
                &mut io::stdout().lock(),
            )
        }
        Command::Mute(args) => {
            let socket = args.daemon.socket();
            let (target, project_only, branch) = match (&args.target, &args.project, &args.branch) {
                (_, _, Some(b)) => (b.as_str(), false, true),
                (_, Some(p), None) => (p.as_str(), true, false),
                (Some(t), None, None) => (t.as_str(), false, false),
                (None, None, None) => {
                    return Err(Error::Usage("`mute` needs a target".to_owned()));
                }
            };
            baton::client::mute(
                socket.as_deref(),
                &baton::client::MuteRequest {
                    target,
                    for_ms: Some(args.for_ms),
                    project_only,
                    branch,
                },
                &mut io::stdout().lock(),
            )
        }
        Command::Hook(args) => {
            hook(&args);
            Ok(())
        }
        Command::Hooks(args) => baton::hooks_cmd::run(&args, &mut io::stdout().lock()),
        Command::Unmute { target, daemon } => {
            let socket = daemon.socket();
            baton::client::mute(
                socket.as_deref(),
                &baton::client::MuteRequest {
                    target: &target,
                    for_ms: None,
                    project_only: false,
                    branch: false,
                },
                &mut io::stdout().lock(),
            )
        }
        Command::Tail(args) => {
            let socket = args.daemon.socket();
            let opts = baton::client::TailOptions {
                json: args.json,
                since_ms: args.since,
                since_id: args.since_id,
                follow: args.follow,
            };
            baton::client::tail(socket.as_deref(), &opts, &mut io::stdout().lock())
        }
        Command::Config { config } => {
            let cfg = config::Config::load(config.as_deref())?;
            write!(io::stdout().lock(), "{}", cfg.to_toml()).map_err(Error::Output)
        }
        Command::Unit | Command::Service(_) => Ok(()), // run by main
        Command::Completions { shell } => {
            baton::completions::completions(shell, &mut io::stdout().lock()).map_err(Error::Output)
        }
        Command::Man { subcommand } => {
            let shown = baton::completions::man(subcommand.as_deref(), &mut io::stdout().lock())
                .map_err(Error::Output)?;
            if shown {
                Ok(())
            } else {
                Err(Error::Usage(format!(
                    "no man page for `{}` (pages: {})",
                    subcommand.unwrap_or_default(),
                    baton::completions::man_pages().join(", ")
                )))
            }
        }
        Command::Scan(args) => {
            let roots = if args.paths.is_empty() {
                config::default_roots()
            } else {
                replay::roots(&args.paths, args.pipeline.provider)?
            };
            let (views, stats) = replay::scan_live(
                replay::Files::Walked(&roots),
                &options(&args.pipeline),
                !args.full_read,
                args.liveness_after,
            )?;
            tracing::info!("{}", stats.summary());
            if args.stats {
                eprintln!("{}", stats.summary());
            }
            let table = baton::people::Table::from_args(&args.table);
            let mut out = io::BufWriter::new(io::stdout().lock());
            scan_view::write(&views, args.json, &table, args.liveness_after, &mut out)
                .map_err(Error::Output)?;
            out.flush().map_err(Error::Output)
        }
    }
}

/// `baton hook`: the hook's input to the daemon, and exit 0 whatever happens (see
/// `baton hook --help`); why it did nothing goes to the log at debug level only.
fn hook(args: &baton::cli::HookArgs) {
    use std::io::Read;
    let input = match &args.payload {
        Some(p) => p.as_bytes().to_vec(),
        None => {
            let mut buf = Vec::new();
            let limit = baton::provider::hook::MAX_HOOK_INPUT as u64 + 1;
            if let Err(e) = io::stdin().lock().take(limit).read_to_end(&mut buf) {
                tracing::debug!(error = %e, "baton hook: cannot read stdin");
                return;
            }
            buf
        }
    };
    let socket = config::socket_path();
    match baton::client::hook(socket.as_deref(), args.agent, &input) {
        Ok(used) => tracing::debug!(used, "baton hook: handed to the daemon"),
        Err(e) => tracing::debug!(error = %e, "baton hook: not handed to the daemon"),
    }
}
