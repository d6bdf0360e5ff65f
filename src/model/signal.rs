//! Signals as Slurm names them to users. Shared by the step actor, which reports
//! `RaisedSignal:N(Name)` for a step killed by a signal, and `srun`, which prints the
//! same name when its tasks die; it lives here, not in either, so neither imports the
//! other. Parsing signal names typed by users (`scancel -s`) stays with the commands.

/// Signal names as Slurm prints them in `RaisedSignal:N(Name)`.
pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        1 => "Hangup",
        2 => "Interrupt",
        3 => "Quit",
        4 => "Illegal instruction",
        6 => "Aborted",
        7 => "Bus error",
        8 => "Floating point exception",
        9 => "Killed",
        10 => "User defined signal 1",
        11 => "Segmentation fault",
        12 => "User defined signal 2",
        13 => "Broken pipe",
        14 => "Alarm clock",
        15 => "Terminated",
        _ => "Unknown signal",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_like_strsignal() {
        assert_eq!(signal_name(9), "Killed");
        assert_eq!(signal_name(15), "Terminated");
        assert_eq!(signal_name(64), "Unknown signal");
    }
}
