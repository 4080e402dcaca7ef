use super::*;
use clap::CommandFactory;

fn start() -> Command {
    crate::cli::Cli::command()
        .find_subcommand("start")
        .cloned()
        .unwrap()
}

/// A config root with `files` (path under the root, contents).
fn root_with(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    dir
}

const USR: &str = "usr/lib/mco-agent/config.d";
const ETC: &str = "etc/mco-agent/config.d";

#[test]
fn fragments_apply_by_name_and_etc_masks_usr_lib() {
    let dir = root_with(&[
        (
            &format!("{USR}/10-dist.toml"),
            "poll_interval = \"10s\"\npool = \"worker\"\n",
        ),
        (
            &format!("{USR}/20-masked.toml"),
            "drain_mode = \"controller\"\n",
        ),
        (&format!("{ETC}/20-masked.toml"), "# the admin's copy\n"),
        (
            &format!("{ETC}/30-admin.toml"),
            "\npoll_interval = \"45s\"\nskip_reboot = true\n",
        ),
        (&format!("{ETC}/notes.txt"), "not a fragment"),
    ]);
    let names: Vec<String> = fragments(dir.path())
        .unwrap()
        .iter()
        .map(|p| p.strip_prefix(dir.path()).unwrap().display().to_string())
        .collect();
    assert_eq!(
        names,
        [
            format!("{USR}/10-dist.toml"),
            format!("{ETC}/20-masked.toml"),
            format!("{ETC}/30-admin.toml")
        ]
    );
    let settings = load(dir.path(), &start()).unwrap();
    let got: Vec<(&str, &str, usize)> = settings
        .iter()
        .map(|(k, s)| (k.as_str(), s.values[0].as_str(), s.line))
        .collect();
    assert_eq!(
        got,
        [
            ("poll_interval", "45s", 2),
            ("pool", "worker", 2),
            ("skip_reboot", "true", 3)
        ]
    );
    assert!(settings["poll_interval"].file.ends_with("30-admin.toml"));
}

#[test]
fn a_bad_fragment_is_one_error_naming_the_file_the_line_and_the_key() {
    let rows: &[(&str, &str)] = &[
        (
            "pool = \"worker\"\npol_interval = \"3s\"\n",
            ":2: unknown key \"pol_interval\"",
        ),
        (
            "\n\npoll_interval = \"forever\"\n",
            ":3: poll_interval: invalid value 'forever'",
        ),
        (
            "poll_interval =\n",
            ":1: not a valid configuration fragment",
        ),
        (
            "skip_reboot = \"yes\"\n",
            ":1: skip_reboot: expected true or false",
        ),
        (
            "drain_mode = \"kubectl\"\n",
            ":1: drain_mode: invalid value 'kubectl'",
        ),
        (
            "pool = [\"a\", \"b\"]\n",
            ":1: pool: expected a single value",
        ),
        ("help = true\n", ":1: unknown key \"help\""),
        (
            "strategy = \"periodic\"\nwindow = [\"Sab 22:00 3h\"]\n",
            ":2: window: invalid value 'Sab 22:00 3h'",
        ),
        (
            "[[window]]\ndays = [\"Sat\"]\nlength_minutes = 60\n",
            ":1: window[0]: start_time: expected \"HH:MM\"",
        ),
        (
            "[[window]]\ndays = [\"Sat\"]\nstart_time = \"22:00\"\nlength = 60\n",
            ":1: window[0]: unknown key \"length\"",
        ),
        ("window = [[1]]\n", ":1: window[0]: expected a string"),
        (
            "window = [\"Sat 22:00\"]\n",
            ":1: window: invalid value 'Sat 22:00'",
        ),
        (
            "strategy = \"fleet-lock\"\n",
            ":1: strategy: invalid value 'fleet-lock'",
        ),
    ];
    for (text, want) in rows {
        let dir = root_with(&[(&format!("{ETC}/50-x.toml"), text)]);
        let err = format!("{:#}", load(dir.path(), &start()).unwrap_err());
        assert!(err.contains(&format!("50-x.toml{want}")), "{text:?}: {err}");
    }
}

#[test]
fn the_command_line_wins_over_the_fragments_and_so_does_a_conflicting_option() {
    let dir = root_with(&[(
        &format!("{ETC}/50-x.toml"),
        "pool = \"infra\"\npoll_interval = \"45s\"\nskip_reboot = true\nconfig_server = \"https://mcs:22623\"\n",
    )]);
    let start = start();
    let settings = load(dir.path(), &start).unwrap();
    let matches = start
        .clone()
        .no_binary_name(true)
        .try_get_matches_from(["--pool", "worker", "--config-file", "/etc/desired.json"])
        .unwrap();
    let added: Vec<(String, Vec<String>)> = arguments_from(&settings, &start, &matches);
    assert_eq!(
        added,
        [
            (
                "poll_interval".to_string(),
                vec!["--poll-interval=45s".to_string()]
            ),
            ("skip_reboot".to_string(), vec!["--skip-reboot".to_string()]),
        ],
        "pool is the command line's; config_server conflicts with the --config-file given"
    );
}

#[test]
fn windows_come_as_strings_or_as_zincatis_tables() {
    let dir = root_with(&[
        (
            &format!("{ETC}/60-windows.toml"),
            "strategy = \"periodic\"\ntime_zone = \"Europe/Berlin\"\n\
         window = [\"Sat,Sun 22:00 3h\"]\n",
        ),
        (
            &format!("{ETC}/70-tables.toml"),
            "[[window]]\ndays = [\"Wed\", \"Thu\"]\nstart_time = \"01:00\"\nlength_minutes = 30\n\
         [[window]]\ndays = [\"Sun\"]\nstart_time = \"23:30\"\nlength_minutes = 90\n",
        ),
    ]);
    let start = start();
    let settings = load(dir.path(), &start).unwrap();
    // the later fragment's windows replace the earlier's, as any key
    assert_eq!(
        settings["window"].values,
        ["Wed,Thu 01:00 30m", "Sun 23:30 90m"]
    );
    assert_eq!(settings["window"].line, 1);
    let matches = start
        .clone()
        .no_binary_name(true)
        .try_get_matches_from(Vec::<String>::new())
        .unwrap();
    let added = arguments_from(&settings, &start, &matches);
    let args: Vec<String> = added.into_iter().flat_map(|(_, a)| a).collect();
    assert_eq!(
        args,
        [
            "--strategy=periodic",
            "--time-zone=Europe/Berlin",
            "--window=Wed,Thu 01:00 30m",
            "--window=Sun 23:30 90m"
        ]
    );
}

#[test]
fn a_mistyped_key_names_the_closest_one_and_a_bad_value_the_accepted_ones() {
    let rows: &[(&str, &str)] = &[
        (
            "pool = \"worker\"\npol_interval = \"3s\"\n",
            ":2: unknown key \"pol_interval\" (did you mean poll_interval?)",
        ),
        (
            "skip_rebot = true\n",
            ":1: unknown key \"skip_rebot\" (did you mean skip_reboot?)",
        ),
        (
            "\n\ndrain_mode = \"kubectl\"\n",
            ":3: drain_mode: invalid value 'kubectl' (accepted: agent, controller)",
        ),
        (
            "strategy = \"fleet-lock\"\n",
            ":1: strategy: invalid value 'fleet-lock' (accepted: immediate, periodic, fleet_lock)",
        ),
        (
            "strategy = \"periodic\"\ntime_zone = \"Mars/Olympus_Mons\"\n",
            ":2: time_zone: invalid value 'Mars/Olympus_Mons': time zone \"Mars/Olympus_Mons\" is not in the time zone database",
        ),
        (
            "poll_interval = \"forever\"\n",
            ":1: poll_interval: invalid value 'forever': ",
        ),
        // a hidden (test) option is never suggested, nor listed
        (
            "drain_retri = \"1s\"\n",
            ":1: unknown key \"drain_retri\" (the keys are the options of `mco-agent start`",
        ),
    ];
    for (text, want) in rows {
        let dir = root_with(&[(&format!("{ETC}/50-x.toml"), text)]);
        let err = format!("{:#}", load(dir.path(), &start()).unwrap_err());
        assert!(err.contains(&format!("50-x.toml{want}")), "{text:?}: {err}");
        assert!(!err.contains("<"), "clap's placeholder in {err}");
    }
    let dir = root_with(&[(&format!("{ETC}/50-x.toml"), "colour = 1\n")]);
    let err = format!("{:#}", load(dir.path(), &start()).unwrap_err());
    for hidden in [
        "drain_retry",
        "boot_id_file",
        "health_retry",
        "fleet_lock_retry",
    ] {
        assert!(!err.contains(hidden), "{hidden} listed in {err}");
    }
    assert!(err.contains("poll_interval"), "{err}");
}

#[test]
fn a_hidden_option_can_still_be_set_in_a_fragment() {
    let dir = root_with(&[(&format!("{ETC}/50-x.toml"), "drain_retry = \"1s\"\n")]);
    let settings = load(dir.path(), &start()).unwrap();
    assert_eq!(settings["drain_retry"].values, ["1s"]);
}
