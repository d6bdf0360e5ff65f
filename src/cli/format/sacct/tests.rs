//! Unit tests for sacct's output: the field list parser and widths, `--helpformat`,
//! unit conversion, CPU time forms and cutting text to a column. Only tests live here;
//! the code under test is in the parent module.

use super::*;

#[test]
fn field_list_parsing() {
    let f = SacctFormat::parse(" jobid , state").unwrap_err();
    assert_eq!(
        f,
        SacctFieldError::InvalidField {
            spec: "jobid ".to_string()
        }
    );
    assert_eq!(f.to_string(), "Invalid field requested: \"jobid \"");
    assert_eq!(f.level(), "error");
    let d = SacctFormat::parse("jobid,AllocGRES").unwrap_err();
    assert_eq!(
        d.to_string(),
        "AllocGRES has been removed, please use AllocTRES"
    );
    assert_eq!(d.level(), "fatal");
    assert!(matches!(
        SacctFormat::parse("reqgres"),
        Err(SacctFieldError::Removed {
            name: "ReqGRES",
            ..
        })
    ));
    assert!(SacctFormat::parse("bogus").is_err());
    // First table entry wins: `j` is JobID, `sta` is Start, `c` is Cluster.
    let f = SacctFormat::parse("j,sta,c,,").unwrap();
    let names: Vec<&str> = f
        .columns
        .iter()
        .map(|c| FIELDS.defs[c.field].header)
        .collect();
    assert_eq!(names, ["JobID", "Start", "Cluster"]);
    // Any prefix of ALL means every field.
    assert_eq!(
        SacctFormat::parse("al").unwrap().columns.len(),
        FIELDS.defs.len()
    );
    assert_eq!(SacctFormat::parse("ALL%5").unwrap().columns[0].width, 5);
    assert_ne!(
        SacctFormat::parse("alloc").unwrap().columns.len(),
        FIELDS.defs.len()
    );
}

#[test]
fn a_width_applies_to_every_column_of_that_field() {
    let f = SacctFormat::parse("jobid,state,jobid%20,state%-3x").unwrap();
    let widths: Vec<i32> = f.columns.iter().map(|c| c.width).collect();
    assert_eq!(widths, [20, -3, 20, -3]);
    let f = SacctFormat::parse("state%,jobname%abc").unwrap();
    let widths: Vec<i32> = f.columns.iter().map(|c| c.width).collect();
    assert_eq!(widths, [0, 0]);
    assert_eq!(atoi_width("99999999999"), MAX_WIDTH);
    assert_eq!(atoi_width(" -7x"), -7);
    assert_eq!(atoi_width("+8"), 8);
}

#[test]
fn help_format_lists_four_per_line() {
    let text = help_format();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), FIELDS.defs.len().div_ceil(4));
    assert_eq!(
        lines[0],
        "Account             AdminComment        AllocCPUS           AllocNodes         "
    );
    assert!(text.ends_with("WorkDir            \n"));
    assert!(text.contains(
        "\nGID                 Group               JobID               JobIDRaw           \n"
    ));
}

#[test]
fn unit_conversion() {
    let exact = Conversion {
        units: None,
        noconvert: false,
    };
    assert_eq!(convert_num(0, UNIT_MEGA, exact), "0");
    assert_eq!(convert_num(1000, UNIT_MEGA, exact), "1000M");
    assert_eq!(convert_num(1024, UNIT_MEGA, exact), "1G");
    assert_eq!(convert_num(16 * 1024, UNIT_MEGA, exact), "16G");
    assert_eq!(convert_num(1536, UNIT_MEGA, exact), "1.50G");
    assert_eq!(convert_num(1234 * 1024, 0, exact), "1234K");
    assert_eq!(convert_num(1_263_617, 0, exact), "1263617");
    assert_eq!(convert_num(3 * 1024 * 1024 * 1024, UNIT_MEGA, exact), "3P");
    // Past P Slurm runs out of letters and prints `?`.
    assert_eq!(convert_num(1024u64.pow(5), UNIT_MEGA, exact), "1?");
    assert_eq!(convert_num(1024u64.pow(6), UNIT_MEGA, exact), "1?");
    let to_g = Conversion {
        units: Some('G'),
        noconvert: false,
    };
    assert_eq!(convert_num(1000, UNIT_MEGA, to_g), "0.98G");
    assert_eq!(
        convert_num(
            2,
            3,
            Conversion {
                units: Some('k'),
                ..to_g
            }
        ),
        "2097152K"
    );
    let raw = Conversion {
        units: None,
        noconvert: true,
    };
    assert_eq!(convert_num(2048, 1, raw), "2048K");
    assert_eq!(unit_index('x'), None);
    assert_eq!(unit_index('p'), Some(5));
}

#[test]
fn cpu_time_forms() {
    assert_eq!(cpu_time_text(0), "00:00:00");
    assert_eq!(cpu_time_text(59_000), "00:00:59");
    assert_eq!(cpu_time_text(61_250), "01:01.250");
    assert_eq!(cpu_time_text(3_600_500), "01:00:00");
    assert_eq!(cpu_time_text(90_061_000), "1-01:01:01");
}

#[test]
fn text_truncation() {
    assert_eq!(cut_with_plus("CANCELLED by 0", 10), "CANCELLED+");
    assert_eq!(cut_with_plus("715219_23.batch", 12), "715219_23.b+");
    assert_eq!(cut_with_plus("exact", 5), "exact");
    assert_eq!(cut_with_plus("日本語テキスト", 3), "日本+");
    assert_eq!(cut_with_plus("x", 0), "");
    assert_eq!(pad("ab", -4), "ab  ");
    assert_eq!(pad("ab", 4), "  ab");
}
