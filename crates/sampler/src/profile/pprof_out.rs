//! A profile as pprof's protobuf (`tickscope_pprof`'s write model), and the files it is
//! written to.

use std::collections::{BTreeSet, HashMap};
use std::io::{self, Write};
use std::path::Path;
use std::time::SystemTime;

use super::*;
use tickscope_pprof as pprof;

impl Profile {
    /// The profile as pprof's protobuf, uncompressed.
    pub fn to_pprof_bytes(&self) -> Vec<u8> {
        pprof::encode(&self.to_pprof())
    }

    /// Writes the profile to `path` as gzip-compressed pprof protobuf (`go tool pprof`,
    /// Pyroscope, speedscope read it).
    ///
    /// The file is written as every output of tickscope's is
    /// (`tickscope_sys::output`): through a temporary file renamed over the name once
    /// complete, never through a symbolic link at the name, into a device or FIFO directly.
    pub fn write_pprof(&self, path: impl AsRef<Path>) -> Result<(), Error> {
        let path = path.as_ref();
        write_output(path, |w| self.write_pprof_to(w))
    }

    /// Writes the profile to `out` as gzip-compressed pprof protobuf.
    pub fn write_pprof_to(&self, out: &mut dyn Write) -> io::Result<()> {
        let mut w = io::BufWriter::new(out);
        pprof::write_gz(&self.to_pprof(), &mut w)?;
        w.flush()
    }

    /// The profile as `tickscope_pprof`'s write model: the mappings, locations and functions
    /// the samples use, numbered from 1 in a stable order.
    fn to_pprof(&self) -> pprof::Profile {
        let kind = match self.mode {
            Mode::Cpu => "cpu",
            Mode::Wall => "wall",
        };
        let (mut out, location_id) = self.pprof_tables();
        out.sample_types = vec![
            pprof::ValueType::new("samples", "count"),
            pprof::ValueType::new(kind, "nanoseconds"),
        ];
        out.period_type = Some(pprof::ValueType::new(kind, "nanoseconds"));
        out.period = self.period_ns as i64;
        out.default_sample_type = kind.into();
        for s in &self.samples {
            let mut labels = Vec::new();
            if s.tid != 0 {
                labels.push(pprof::Label::str("thread", self.thread_label(s.tid)));
                labels.push(pprof::Label::num("tid", s.tid as i64, ""));
            }
            for id in &s.scopes {
                if let Some(name) = self.scope_names.get(id) {
                    labels.push(pprof::Label::str("scope", name.as_str()));
                }
            }
            out.samples.push(pprof::Sample {
                location_ids: s.locs.iter().map(|l| location_id[l]).collect(),
                values: vec![s.counts.count as i64, s.counts.weight as i64],
                labels,
            });
        }
        out
    }

    /// The write model's times, comments, mappings, locations and functions (those the
    /// samples use, numbered from 1 in a stable order), and each location's id; no sample
    /// types and no samples (the caller's: CPU time here, the heap profile's four).
    pub(super) fn pprof_tables(&self) -> (pprof::Profile, HashMap<&Loc, u64>) {
        let mut out = pprof::Profile {
            duration_nanos: self.duration.as_nanos() as i64,
            time_nanos: self
                .start_time
                .duration_since(SystemTime::UNIX_EPOCH)
                .map(|d| d.as_nanos() as i64)
                .unwrap_or(0),
            comments: self.comments.clone(),
            ..pprof::Profile::default()
        };
        // Mappings: the program's own first (pprof's `File:` is the first mapping's), then
        // the modules any sample touched, in address order.
        let used: BTreeSet<usize> = self.module_of.values().copied().collect();
        let main = self.exe.as_ref().and_then(|exe| {
            self.modules
                .iter()
                .position(|m| std::path::Path::new(&m.path) == exe.as_path())
        });
        let order: Vec<usize> = main
            .into_iter()
            .chain(used.iter().copied().filter(|&m| Some(m) != main))
            .collect();
        let mut mapping_id = HashMap::new();
        for &m in &order {
            let module = &self.modules[m];
            let id = out.mappings.len() as u64 + 1;
            mapping_id.insert(m, id);
            let symbolised = self
                .module_of
                .iter()
                .any(|(a, &mm)| mm == m && self.symbols.contains_key(a));
            out.mappings.push(pprof::Mapping {
                id,
                start: module.start,
                limit: module.limit,
                offset: module.offset,
                file: module.path.clone(),
                build_id: module.build_id.clone(),
                has_functions: symbolised,
                has_filenames: symbolised && module.has_debug_info,
                has_line_numbers: symbolised && module.has_debug_info,
                has_inline_frames: symbolised && module.has_debug_info,
            });
        }
        // Functions and locations, in a stable order: addresses ascending, then synthetics.
        let mut function_id: HashMap<(String, String, String), u64> = HashMap::new();
        let mut function = |out: &mut pprof::Profile, name: &str, system: &str, file: &str| {
            let key = (name.to_string(), system.to_string(), file.to_string());
            if let Some(&id) = function_id.get(&key) {
                return id;
            }
            let id = out.functions.len() as u64 + 1;
            out.functions.push(pprof::Function {
                id,
                name: name.into(),
                system_name: system.into(),
                filename: file.into(),
                start_line: 0,
            });
            function_id.insert(key, id);
            id
        };
        let locs: BTreeSet<&Loc> = self.samples.iter().flat_map(|s| s.locs.iter()).collect();
        let mut location_id = HashMap::new();
        for loc in locs {
            let id = out.locations.len() as u64 + 1;
            location_id.insert(loc, id);
            let location = match loc {
                Loc::Addr(a) => pprof::Location {
                    id,
                    mapping_id: self
                        .module_of
                        .get(a)
                        .and_then(|m| mapping_id.get(m))
                        .copied()
                        .unwrap_or(0),
                    address: *a,
                    lines: self
                        .symbols
                        .get(a)
                        .map(|frames| {
                            frames
                                .iter()
                                .map(|f| pprof::Line {
                                    function_id: function(
                                        &mut out,
                                        &f.name,
                                        &f.system_name,
                                        &f.file,
                                    ),
                                    line: f.line as i64,
                                })
                                .collect()
                        })
                        .unwrap_or_default(),
                    ..pprof::Location::default()
                },
                Loc::Synthetic(name) => pprof::Location {
                    id,
                    lines: vec![pprof::Line {
                        function_id: function(&mut out, name, name, ""),
                        line: 0,
                    }],
                    ..pprof::Location::default()
                },
            };
            out.locations.push(location);
        }
        (out, location_id)
    }
}

fn write_error(path: &Path, e: io::Error) -> Error {
    Error::new(
        ErrorKind::Io,
        format!("cannot write the profile to {}", path.display()),
        Some(e),
    )
}

/// Writes an output at `path` with `write` ([`crate::sys::output`]): replaced only once whole.
pub(crate) fn write_output(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<(), Error> {
    let mut out = crate::sys::output::OutputFile::create(path).map_err(|e| write_error(path, e))?;
    write(out.file()).map_err(|e| write_error(path, e))?;
    out.commit().map_err(|e| write_error(path, e))
}
