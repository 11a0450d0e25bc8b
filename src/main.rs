//! `querypilot`: command line entry point. Parses arguments, loads the configuration, starts the
//! router and turns errors into messages and exit codes.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use querypilot::{app, config::Config};

const USAGE: &str = "usage: querypilot [-c|--config FILE] [--check] [--take-over SOCKET]

Config file: --config/-c, else $QUERYPILOT_CONFIG, else ./querypilot.toml
  --check              validate the configuration and exit (0 = valid; warnings go to stderr)
  --take-over SOCKET   take the listeners and clients over from the router whose
                       general.handover_socket is SOCKET (binary upgrade)";

struct Args {
    config: PathBuf,
    check: bool,
    take_over: Option<PathBuf>,
}

fn parse_args() -> Result<Args> {
    let mut config = None;
    let mut check = false;
    let mut take_over = None;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "-c" | "--config" => config = Some(PathBuf::from(it.next().context("--config needs a file")?)),
            "--check" => check = true,
            "--take-over" => take_over = Some(PathBuf::from(it.next().context("--take-over needs a socket")?)),
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?}\n{USAGE}"),
        }
    }
    let config = config
        .or_else(|| std::env::var_os("QUERYPILOT_CONFIG").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("querypilot.toml"));
    Ok(Args { config, check, take_over })
}

fn load(path: &PathBuf) -> Result<Config> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(Config::parse(&text, &path.display().to_string())?)
}

fn run() -> Result<()> {
    let args = parse_args()?;
    let mut config = load(&args.config)?;
    if args.check {
        querypilot::control::load_tls(&mut config)?;
        for warning in config.warnings().into_iter().chain(querypilot::routing::translation_warnings(&config)) {
            eprintln!("warning: {warning}");
        }
        println!("{}: configuration is valid", args.config.display());
        return Ok(());
    }
    let filter = tracing_subscriber::EnvFilter::try_from_env("QUERYPILOT_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(&config.general.log_level));
    let log = app::LogSink::open(&config.general).context("cannot open general.log_file")?;
    log.install(&config.general, filter);
    quiet_caught_sqlparser_panics();
    let running = app::start_taking_over(config, Some(args.config.clone()), log.drops(), args.take_over.as_deref())?;
    for addr in &running.listen {
        tracing::info!(%addr, "listening");
    }
    let notifier = app::Notifier::from_env();
    app::watch_signals(running.control.clone(), log, notifier.clone()).context("cannot install signal handlers")?;
    notifier.ready();
    running.wait();
    tracing::info!("stopped");
    Ok(())
}

/// sqlparser's own panics are caught by `sql::parse`, which refuses the statement, so they are
/// not failures; and their messages quote the client's SQL, which logs must never hold (#12). The
/// default hook would print them to stderr: for those it only notes the location at debug level.
fn quiet_caught_sqlparser_panics() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| match info.location() {
        Some(at) if querypilot::sql::parse::raised_in_sqlparser(at) => {
            tracing::debug!(%at, "sqlparser panicked; the statement is treated as unparsable");
        }
        _ => default_hook(info),
    }));
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("querypilot: {e:#}");
            ExitCode::FAILURE
        }
    }
}
