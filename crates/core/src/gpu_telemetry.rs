//! GPU telemetry: the utilisation, memory, power and energy of this machine's NVIDIA GPUs,
//! sampled while a run goes on, so that a report can say what the output cost in joules
//! per token, next to the throughput it bought.
//!
//! **Loaded at run time.** bench has to build and run where there is no NVIDIA driver
//! (CI, laptops, a client machine apart from the server). `nvml-wrapper` opens
//! `libnvidia-ml.so.1` with `libloading` when [`start`] calls `Nvml::init()` and links
//! nothing of NVIDIA's, so where the library or a GPU is missing [`start`] returns
//! [`Unavailable`]: a one-line note for the console (only a log line at `info` where the
//! library is absent altogether, the ordinary state of a machine without an NVIDIA GPU),
//! and the run goes on without GPU figures. Never a failure of the run.
//!
//! **Which GPUs.** Those NVML sees on the machine bench runs on: the server's only when
//! the server runs here too. NVML numbers every GPU of the machine and ignores
//! `CUDA_VISIBLE_DEVICES` (which the library would not read anyway: it reads no
//! environment during a run), so a server on some of several GPUs wants
//! [`start_devices`] with NVML's indices, or the other GPUs' idle draw counts too.
//!
//! **Energy.** Per device, the difference of NVML's total-energy counter
//! (`nvmlDeviceGetTotalEnergyConsumption`, Volta and newer, millijoules since the driver
//! loaded) between the first and the last sample: it counts every joule whatever the
//! sampling interval. Where the counter is not supported (or did not answer at both
//! ends), the trapezoid over the power samples instead, which is as good as the interval
//! is short against the power's swings ([`EnergySource`] says which one a device got).
//! The window is from [`start`] to [`GpuSampler::finish`]: start it right before the
//! requests go out and finish it right after the last one ends, or idle time is charged
//! to the tokens.
//!
//! **Cost.** Nothing on the request path: the first sample is taken in [`start`], before
//! the run's clock, and every later NVML call on the sampler's own thread, `bench-gpu`,
//! which sleeps between samples. A failing NVML call loses that metric for that device in
//! that sample; a metric the device does not support (or a driver without the function)
//! is not asked again. Neither stops the sampling nor the run.
//!
//! The arithmetic ([`Tally`]) reads samples from a [`Source`], so tests drive it with a
//! fake one and no GPU.

use std::ffi::OsStr;
use std::fmt;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nvml_wrapper::Nvml;
use nvml_wrapper::error::NvmlError;
use serde_json::{Map, Value, json};

/// The file NVML is loaded from, as `nvml-wrapper` names it by default: the driver
/// package's soname, not the `-dev` symlink `libnvidia-ml.so`, so that a machine with the
/// driver alone has it.
#[cfg(not(windows))]
pub const LIBRARY: &str = "libnvidia-ml.so.1";
/// The file NVML is loaded from on Windows.
#[cfg(windows)]
pub const LIBRARY: &str = "nvml.dll";

/// A sampling interval that suits runs of seconds to hours: short enough that the
/// integrated-power fallback follows a GPU's swings between prefill and decode, long
/// enough that the few NVML calls per device cost nothing worth counting. NVML itself
/// refreshes power every 20 to 100 ms and utilisation over 1/6 s to 1 s.
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(100);

/// Intervals shorter than this are raised to it: a zero interval would spin the thread.
const MIN_INTERVAL: Duration = Duration::from_millis(1);

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Why there are no GPU figures, in one line: NVML's library is absent or did not start,
/// or it sees no GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable {
    pub note: String,
    /// NVIDIA's library is not on this machine at all: the ordinary state of a machine
    /// without an NVIDIA GPU (a CPU server, a client that benchmarks a remote server), so
    /// the caller logs it and keeps it in the result rather than printing it on every
    /// run. Anything else (a library that fails, no GPU, a missing index) is worth a
    /// console note.
    pub library_absent: bool,
}

impl Unavailable {
    fn new(note: String) -> Self {
        Unavailable {
            note,
            library_absent: false,
        }
    }
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.note)
    }
}

impl std::error::Error for Unavailable {}

/// Where a device's `energy_j` came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnergySource {
    /// The delta of `nvmlDeviceGetTotalEnergyConsumption` (Volta and newer, mJ) between
    /// the first and the last sample: exact whatever the interval.
    Counter,
    /// The trapezoid over the power samples, where the counter is not supported or did
    /// not answer at both ends: an estimate, as good as the interval is short.
    IntegratedPower,
    /// Neither the counter nor power answered: `energy_j` is 0 and counts for nothing
    /// ([`GpuReport::energy_per_output_token_j`] is `None` when no device measured energy).
    Unmeasured,
}

impl EnergySource {
    /// The name written to the result file (`energy_source` of `gpu_devices`).
    pub fn as_str(self) -> &'static str {
        match self {
            EnergySource::Counter => "counter",
            EnergySource::IntegratedPower => "integrated_power",
            EnergySource::Unmeasured => "unmeasured",
        }
    }
}

impl fmt::Display for EnergySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One GPU over the run. A metric the device never reported has a count of 0 in its
/// `*_samples` field and 0 in its values (written `null` to the result file, left off the
/// console), so that an unsupported metric is never read as an idle GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceReport {
    /// NVML's index of the device (not CUDA's, which `CUDA_VISIBLE_DEVICES` may renumber).
    pub index: u32,
    /// NVML's product name, e.g. "NVIDIA H100 80GB HBM3".
    pub name: String,
    /// Samples taken of this device (the first in [`start`], the last in
    /// [`GpuSampler::finish`], the others every interval between).
    pub samples: usize,
    /// Samples that carried the GPU utilisation.
    pub utilization_samples: usize,
    /// Mean of NVML's GPU utilisation (% of time a kernel ran) over the samples.
    pub mean_utilization_pct: f64,
    /// Highest utilisation sampled.
    pub max_utilization_pct: f64,
    /// Samples that carried memory.
    pub memory_samples: usize,
    /// Highest memory in use sampled (bytes).
    pub peak_memory_used_bytes: u64,
    /// The device's memory (bytes).
    pub memory_total_bytes: u64,
    /// Samples that carried power.
    pub power_samples: usize,
    /// Mean of the power samples (W).
    pub mean_power_w: f64,
    /// Highest power sampled (W).
    pub max_power_w: f64,
    /// Energy over the window (J), from `energy_source`.
    pub energy_j: f64,
    /// Where `energy_j` came from.
    pub energy_source: EnergySource,
}

/// The run's tokens that the GPUs' energy is divided by: its result's
/// `total_input_tokens` and `total_output_tokens`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TokenTotals {
    pub input: u64,
    pub output: u64,
}

/// The GPUs over the window from [`start`] to [`GpuSampler::finish`].
#[derive(Debug, Clone, PartialEq)]
pub struct GpuReport {
    /// One per device sampled, in NVML's order.
    pub devices: Vec<DeviceReport>,
    /// Seconds from the first sample to the last.
    pub duration_s: f64,
    /// The highest power of all devices together in one sample (W): the peak the
    /// machine's GPUs drew at once, which a sum of per-device peaks would overstate.
    /// `None` when no device reported power.
    pub peak_power_w: Option<f64>,
    /// The most memory in use on all devices together in one sample (bytes); `None` when
    /// no device reported memory.
    pub peak_memory_used_bytes: Option<u64>,
}

impl GpuReport {
    /// Energy of all devices (J): what the GPUs spent on the run.
    pub fn energy_j(&self) -> f64 {
        self.devices.iter().map(|d| d.energy_j).sum()
    }

    /// Whether any device measured energy (by counter or power).
    pub fn energy_measured(&self) -> bool {
        self.devices
            .iter()
            .any(|d| d.energy_source != EnergySource::Unmeasured)
    }

    /// [`GpuReport::energy_j`] per token of a count (J): the whole energy over output
    /// tokens, input tokens or both, each taking all of it, so the three are not
    /// additive; `None` for 0 tokens or when no device measured energy, rather than a
    /// division by zero or a false 0.
    pub fn energy_per_token_j(&self, tokens: u64) -> Option<f64> {
        (tokens > 0 && self.energy_measured()).then(|| self.energy_j() / tokens as f64)
    }

    /// Mean power of all devices together (W): the sum of the devices' means.
    pub fn mean_power_w(&self) -> Option<f64> {
        let reporting: Vec<_> = self
            .devices
            .iter()
            .filter(|d| d.power_samples > 0)
            .collect();
        (!reporting.is_empty()).then(|| reporting.iter().map(|d| d.mean_power_w).sum())
    }

    /// Mean utilisation over the devices that reported it (%): a percentage, so an
    /// average across GPUs rather than a sum.
    pub fn mean_utilization_pct(&self) -> Option<f64> {
        let means: Vec<f64> = self
            .devices
            .iter()
            .filter(|d| d.utilization_samples > 0)
            .map(|d| d.mean_utilization_pct)
            .collect();
        (!means.is_empty()).then(|| means.iter().sum::<f64>() / means.len() as f64)
    }

    /// The highest utilisation any device reported (%).
    pub fn max_utilization_pct(&self) -> Option<f64> {
        self.devices
            .iter()
            .filter(|d| d.utilization_samples > 0)
            .map(|d| d.max_utilization_pct)
            .reduce(f64::max)
    }

    /// The memory of the devices that reported memory (bytes).
    pub fn memory_total_bytes(&self) -> Option<u64> {
        let reporting: Vec<_> = self
            .devices
            .iter()
            .filter(|d| d.memory_samples > 0)
            .collect();
        (!reporting.is_empty()).then(|| reporting.iter().map(|d| d.memory_total_bytes).sum())
    }

    /// The result-file keys (bench's own; vLLM has no GPU figures), to append after vLLM's:
    /// `gpu_duration_s`, `gpu_energy_j`, `gpu_energy_per_output_token_j`,
    /// `gpu_energy_per_input_token_j`, `gpu_energy_per_token_j` (input and output
    /// together), `gpu_mean_power_w`, `gpu_max_power_w`, `gpu_mean_utilization_pct`,
    /// `gpu_max_utilization_pct`, `gpu_peak_memory_used_bytes`, `gpu_memory_total_bytes`
    /// (all devices together, as the methods above define them) and `gpu_devices`, one
    /// object per device with [`DeviceReport`]'s figures under the same names. A figure
    /// nothing measured is `null`, so the keys are the same on every GPU run.
    pub fn result_keys(&self, tokens: TokenTotals) -> Map<String, Value> {
        let mut keys = Map::new();
        keys.insert("gpu_duration_s".into(), float(self.duration_s));
        keys.insert(
            "gpu_energy_j".into(),
            opt_float(self.energy_measured().then(|| self.energy_j())),
        );
        for (key, _, count) in Self::energy_per_token_counts(tokens) {
            keys.insert(key.into(), opt_float(self.energy_per_token_j(count)));
        }
        keys.insert("gpu_mean_power_w".into(), opt_float(self.mean_power_w()));
        keys.insert("gpu_max_power_w".into(), opt_float(self.peak_power_w));
        keys.insert(
            "gpu_mean_utilization_pct".into(),
            opt_float(self.mean_utilization_pct()),
        );
        keys.insert(
            "gpu_max_utilization_pct".into(),
            opt_float(self.max_utilization_pct()),
        );
        keys.insert(
            "gpu_peak_memory_used_bytes".into(),
            json!(self.peak_memory_used_bytes),
        );
        keys.insert(
            "gpu_memory_total_bytes".into(),
            json!(self.memory_total_bytes()),
        );
        let devices = self.devices.iter().map(device_object).collect();
        keys.insert("gpu_devices".into(), Value::Array(devices));
        keys
    }

    /// The console block, in the layout of vLLM's report blocks (`{:<40} {:<10.2f}`, the
    /// heading centred in 50 `=`), one line per element without the newline. Figures
    /// nothing measured are left out; energy per token is in mJ, where two decimals
    /// still show it (J per token is mostly below 0.1).
    pub fn console_lines(&self, tokens: TokenTotals) -> Vec<String> {
        let mut out = vec![format!("{:=^50}", " GPU (NVML) ")];
        let line = |out: &mut Vec<String>, label: &str, value: &dyn fmt::Display| {
            out.push(format!("{label:<40} {value:<10}"));
        };
        let line_f = |out: &mut Vec<String>, label: &str, value: f64| {
            out.push(format!("{label:<40} {value:<10.2}"));
        };
        for d in &self.devices {
            line(&mut out, &format!("GPU {}:", d.index), &d.name);
        }
        line_f(&mut out, "GPU sampling time (s):", self.duration_s);
        if let Some(u) = self.mean_utilization_pct() {
            line_f(&mut out, "Mean GPU utilization (%):", u);
        }
        if let Some(u) = self.max_utilization_pct() {
            line_f(&mut out, "Max GPU utilization (%):", u);
        }
        if let Some(m) = self.peak_memory_used_bytes {
            line_f(&mut out, "Peak GPU memory used (GiB):", m as f64 / GIB);
        }
        if let Some(m) = self.memory_total_bytes() {
            line_f(&mut out, "GPU memory total (GiB):", m as f64 / GIB);
        }
        if let Some(p) = self.mean_power_w() {
            line_f(&mut out, "Mean GPU power (W):", p);
        }
        if let Some(p) = self.peak_power_w {
            line_f(&mut out, "Max GPU power (W):", p);
        }
        if self.energy_measured() {
            line_f(&mut out, "GPU energy (J):", self.energy_j());
            for (_, label, count) in Self::energy_per_token_counts(tokens) {
                if let Some(e) = self.energy_per_token_j(count) {
                    line_f(&mut out, label, e * 1000.0);
                }
            }
            line(&mut out, "GPU energy from:", &self.energy_sources());
        }
        if self.devices.len() > 1 {
            for d in self.devices.iter() {
                if d.energy_source != EnergySource::Unmeasured {
                    line_f(
                        &mut out,
                        &format!("GPU {} energy (J):", d.index),
                        d.energy_j,
                    );
                }
            }
        }
        out.push("=".repeat(50));
        out
    }

    /// The energy-per-token figures: each one's result key, console label, and the count
    /// it divides the energy by; output first (the key bench had before the others).
    fn energy_per_token_counts(tokens: TokenTotals) -> [(&'static str, &'static str, u64); 3] {
        [
            (
                "gpu_energy_per_output_token_j",
                "GPU energy per output token (mJ):",
                tokens.output,
            ),
            (
                "gpu_energy_per_input_token_j",
                "GPU energy per input token (mJ):",
                tokens.input,
            ),
            (
                "gpu_energy_per_token_j",
                "GPU energy per token (mJ):",
                tokens.input + tokens.output,
            ),
        ]
    }

    /// "counter", "integrated power", or both joined where devices differ.
    fn energy_sources(&self) -> String {
        let mut names: Vec<&str> = Vec::new();
        for d in &self.devices {
            let name = match d.energy_source {
                EnergySource::Counter => "counter",
                EnergySource::IntegratedPower => "integrated power",
                EnergySource::Unmeasured => continue,
            };
            if !names.contains(&name) {
                names.push(name);
            }
        }
        names.join(", ")
    }
}

fn device_object(d: &DeviceReport) -> Value {
    let if_any = |n: usize, v: f64| opt_float((n > 0).then_some(v));
    let measured = d.energy_source != EnergySource::Unmeasured;
    json!({
        "index": d.index,
        "name": d.name,
        "samples": d.samples,
        "mean_utilization_pct": if_any(d.utilization_samples, d.mean_utilization_pct),
        "max_utilization_pct": if_any(d.utilization_samples, d.max_utilization_pct),
        "peak_memory_used_bytes": (d.memory_samples > 0).then_some(d.peak_memory_used_bytes),
        "memory_total_bytes": (d.memory_samples > 0).then_some(d.memory_total_bytes),
        "mean_power_w": if_any(d.power_samples, d.mean_power_w),
        "max_power_w": if_any(d.power_samples, d.max_power_w),
        "energy_j": opt_float(measured.then_some(d.energy_j)),
        "energy_source": d.energy_source.as_str(),
    })
}

/// A finite float as a JSON number; anything else (never produced here) as `null`.
fn float(x: f64) -> Value {
    serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)
}

fn opt_float(x: Option<f64>) -> Value {
    x.map_or(Value::Null, float)
}

/// Starts sampling all the GPUs NVML sees, every `interval`, on a thread of its own
/// (`bench-gpu`), the first sample taken before it returns. `Err(Unavailable)` with a
/// one-line reason when NVML's library is absent or does not start, or finds no GPU:
/// print it and run without GPU figures. Loading NVML and the first sample can take from
/// milliseconds to seconds (longer without the driver's persistence mode), so call it
/// after the warm-up and before the run's clock starts, where that delay is not measured.
pub fn start(interval: Duration) -> Result<GpuSampler, Unavailable> {
    start_devices(interval, &[])
}

/// [`start`] for the GPUs with these NVML indices (all of them when empty): the server's,
/// where it runs on some of this machine's GPUs. An index NVML does not have is
/// `Unavailable`, since the figures would silently leave that GPU out.
pub fn start_devices(interval: Duration, indices: &[u32]) -> Result<GpuSampler, Unavailable> {
    let (source, devices) = NvmlSource::open(OsStr::new(LIBRARY), indices)?;
    spawn(source, devices, interval)
}

/// The running sampler; [`GpuSampler::finish`] stops it and gives the report. Dropping
/// it without finishing stops the thread too (its channel closes).
#[derive(Debug)]
pub struct GpuSampler {
    stop: mpsc::Sender<()>,
    thread: JoinHandle<Tally>,
    devices: Vec<(u32, String)>,
    interval: Duration,
}

impl GpuSampler {
    /// The devices sampled: NVML's index and name.
    pub fn devices(&self) -> &[(u32, String)] {
        &self.devices
    }

    /// A line for the console when sampling starts, e.g. "GPU telemetry: sampling GPU 0
    /// (NVIDIA H100 80GB HBM3) every 100 ms".
    pub fn describe(&self) -> String {
        let names: Vec<String> = self
            .devices
            .iter()
            .map(|(i, name)| format!("GPU {i} ({name})"))
            .collect();
        format!(
            "GPU telemetry: sampling {} every {} ms",
            names.join(", "),
            self.interval.as_millis()
        )
    }

    /// Stops the thread, which takes a last sample first, and reports the window from
    /// the first sample to that one. If the thread died (a panic inside NVML), the report
    /// has no devices and a warning is logged: the run's own results stand.
    pub fn finish(self) -> GpuReport {
        // A send fails only when the thread is gone already; join says why.
        let _ = self.stop.send(());
        match self.thread.join() {
            Ok(tally) => tally.report(),
            Err(_) => {
                tracing::warn!("GPU telemetry: the sampling thread panicked; no GPU figures");
                GpuReport {
                    devices: Vec::new(),
                    duration_s: 0.0,
                    peak_power_w: None,
                    peak_memory_used_bytes: None,
                }
            }
        }
    }
}

/// Takes the first sample now, then starts the thread that takes the others.
fn spawn<S: Source>(
    mut source: S,
    devices: Vec<(u32, String)>,
    interval: Duration,
) -> Result<GpuSampler, Unavailable> {
    let interval = interval.max(MIN_INTERVAL);
    let mut tally = Tally::new(&devices);
    let t0 = Instant::now();
    tally.add(0.0, &source.sample());
    let (stop, stopped) = mpsc::channel();
    let thread = std::thread::Builder::new()
        .name("bench-gpu".into())
        .spawn(move || sample_until_stopped(source, tally, t0, interval, &stopped))
        .map_err(|e| {
            Unavailable::new(format!(
                "GPU telemetry: its sampling thread did not start ({}); no GPU figures",
                one_line(&e.to_string())
            ))
        })?;
    Ok(GpuSampler {
        stop,
        thread,
        devices,
        interval,
    })
}

/// The sampling thread: a sample at every `t0 + k * interval` until told to stop, then a
/// last one. Waiting on the channel rather than sleeping lets `finish` return at once.
/// After a stall (a slow NVML call, a suspended machine) it samples once and goes on from
/// now, rather than catching up with a burst of samples at the same instant.
fn sample_until_stopped<S: Source>(
    mut source: S,
    mut tally: Tally,
    t0: Instant,
    interval: Duration,
    stopped: &mpsc::Receiver<()>,
) -> Tally {
    let mut next = t0 + interval;
    loop {
        match stopped.recv_timeout(next.saturating_duration_since(Instant::now())) {
            Err(RecvTimeoutError::Timeout) => {
                let t = t0.elapsed().as_secs_f64();
                tally.add(t, &source.sample());
                next += interval;
                let now = Instant::now();
                if next <= now {
                    next = now + interval;
                }
            }
            Ok(()) => {
                let t = t0.elapsed().as_secs_f64();
                tally.add(t, &source.sample());
                return tally;
            }
            // The sampler was dropped without `finish`: nobody will read a last sample.
            Err(RecvTimeoutError::Disconnected) => return tally,
        }
    }
}

/// What one device reported in one sample; `None` where the call failed or is not
/// supported.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Sample {
    utilization_pct: Option<f64>,
    memory_used_bytes: Option<u64>,
    memory_total_bytes: Option<u64>,
    power_w: Option<f64>,
    /// NVML's total-energy counter (mJ since the driver loaded).
    energy_mj: Option<u64>,
}

/// Reads every device once: one [`Sample`] per device, in the order of the devices given
/// to [`spawn`]. NVML in a run, a fake in the tests.
trait Source: Send + 'static {
    fn sample(&mut self) -> Vec<Sample>;
}

/// NVML, owned by the sampling thread (`Nvml` is `Send`; dropping it shuts NVML down).
struct NvmlSource {
    nvml: Nvml,
    devices: Vec<NvmlDevice>,
}

/// A device by index (a `Device` borrows the `Nvml`, so the handle is looked up per
/// sample, which is one cheap call) and which metrics are still worth asking.
struct NvmlDevice {
    index: u32,
    ask: Asks,
}

/// Per metric, whether to ask: cleared once a device answers that it cannot.
#[derive(Debug, Clone, Copy)]
struct Asks {
    utilization: bool,
    memory: bool,
    power: bool,
    energy: bool,
}

impl Default for Asks {
    fn default() -> Self {
        Asks {
            utilization: true,
            memory: true,
            power: true,
            energy: true,
        }
    }
}

impl NvmlSource {
    /// Loads NVML from `library` and picks the devices (`indices`, or all when empty);
    /// `Unavailable` when it does not load or start, or there is no device.
    fn open(library: &OsStr, indices: &[u32]) -> Result<(Self, Vec<(u32, String)>), Unavailable> {
        let lib = library.to_string_lossy();
        let nvml = Nvml::builder()
            .lib_path(library)
            .init()
            .map_err(|e| init_failure(&lib, &e))?;
        let count = nvml.device_count().map_err(|e| {
            Unavailable::new(format!(
                "GPU telemetry: NVIDIA's management library ({lib}) could not count the GPUs ({}); no GPU figures",
                one_line(&e.to_string())
            ))
        })?;
        let wanted: Vec<u32> = if indices.is_empty() {
            (0..count).collect()
        } else {
            if let Some(missing) = indices.iter().find(|&&i| i >= count) {
                return Err(Unavailable::new(format!(
                    "GPU telemetry: there is no GPU {missing} (NVIDIA's management library sees {count}); no GPU figures"
                )));
            }
            indices.to_vec()
        };
        let mut devices = Vec::new();
        let mut named = Vec::new();
        for index in wanted {
            match nvml.device_by_index(index) {
                Ok(device) => {
                    let name = device.name().unwrap_or_else(|_| "unknown".into());
                    named.push((index, name));
                    devices.push(NvmlDevice {
                        index,
                        ask: Asks::default(),
                    });
                }
                Err(e) => tracing::warn!("GPU telemetry: GPU {index} left out: {e}"),
            }
        }
        if devices.is_empty() {
            return Err(Unavailable::new(format!(
                "GPU telemetry: NVIDIA's management library ({lib}) found no GPU; no GPU figures"
            )));
        }
        Ok((NvmlSource { nvml, devices }, named))
    }
}

impl Source for NvmlSource {
    fn sample(&mut self) -> Vec<Sample> {
        let nvml = &self.nvml;
        self.devices
            .iter_mut()
            .map(|d| {
                let Ok(device) = nvml.device_by_index(d.index) else {
                    return Sample::default();
                };
                let memory = read(&mut d.ask.memory, || device.memory_info());
                Sample {
                    utilization_pct: read(&mut d.ask.utilization, || device.utilization_rates())
                        .map(|u| f64::from(u.gpu)),
                    memory_used_bytes: memory.as_ref().map(|m| m.used),
                    memory_total_bytes: memory.as_ref().map(|m| m.total),
                    // NVML gives milliwatts.
                    power_w: read(&mut d.ask.power, || device.power_usage())
                        .map(|mw| f64::from(mw) / 1000.0),
                    energy_mj: read(&mut d.ask.energy, || device.total_energy_consumption()),
                }
            })
            .collect()
    }
}

/// One metric of one device: `None` on any failure, and `ask` cleared when the failure
/// says the device or driver will never answer (not supported, no such function, no
/// permission), so later samples do not ask again.
fn read<T>(ask: &mut bool, call: impl FnOnce() -> Result<T, NvmlError>) -> Option<T> {
    if !*ask {
        return None;
    }
    match call() {
        Ok(value) => Some(value),
        Err(e) => {
            if matches!(
                e,
                NvmlError::NotSupported
                    | NvmlError::FunctionNotFound
                    | NvmlError::FailedToLoadSymbol(_)
                    | NvmlError::NoPermission
            ) {
                tracing::debug!("GPU telemetry: a metric is not available: {e}");
                *ask = false;
            }
            None
        }
    }
}

/// The one-line reason for a failed `Nvml::init()`.
fn init_failure(lib: &str, e: &NvmlError) -> Unavailable {
    tracing::debug!("GPU telemetry: NVML did not start: {e:?}");
    let mut library_absent = false;
    let what = match e {
        NvmlError::LibloadingError(load) => {
            let why = load.to_string();
            if why.contains("No such file") || why.contains("cannot find") {
                library_absent = true;
                "was not found".to_string()
            } else {
                format!("did not load ({})", one_line(&why))
            }
        }
        NvmlError::DriverNotLoaded => "found no NVIDIA driver loaded".to_string(),
        other => format!("did not start ({})", one_line(&other.to_string())),
    };
    Unavailable {
        note: format!("GPU telemetry: NVIDIA's management library ({lib}) {what}; no GPU figures"),
        library_absent,
    }
}

/// `text` on one line: an error's own newlines would break the console's one-line note.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The sums and peaks of every device, fed one round of samples at a time.
#[derive(Debug)]
struct Tally {
    devices: Vec<DeviceTally>,
    first_t: Option<f64>,
    last_t: f64,
    peak_power_w: Option<f64>,
    peak_memory_used_bytes: Option<u64>,
}

impl Tally {
    fn new(devices: &[(u32, String)]) -> Self {
        Tally {
            devices: devices
                .iter()
                .map(|(index, name)| DeviceTally::new(*index, name.clone()))
                .collect(),
            first_t: None,
            last_t: 0.0,
            peak_power_w: None,
            peak_memory_used_bytes: None,
        }
    }

    /// One round: `samples[i]` is device `i`'s at `t` seconds since the start. The
    /// round's totals over the devices give the peaks of all GPUs together.
    fn add(&mut self, t: f64, samples: &[Sample]) {
        self.first_t.get_or_insert(t);
        self.last_t = t;
        let mut power: Option<f64> = None;
        let mut memory: Option<u64> = None;
        for (device, sample) in self.devices.iter_mut().zip(samples) {
            device.add(t, sample);
            if let Some(w) = sample.power_w {
                *power.get_or_insert(0.0) += w;
            }
            if let Some(m) = sample.memory_used_bytes {
                *memory.get_or_insert(0) += m;
            }
        }
        if let Some(w) = power {
            self.peak_power_w = Some(self.peak_power_w.map_or(w, |p| p.max(w)));
        }
        if let Some(m) = memory {
            self.peak_memory_used_bytes = Some(self.peak_memory_used_bytes.map_or(m, |p| p.max(m)));
        }
    }

    fn report(&self) -> GpuReport {
        GpuReport {
            devices: self.devices.iter().map(DeviceTally::report).collect(),
            duration_s: self.first_t.map_or(0.0, |first| self.last_t - first),
            peak_power_w: self.peak_power_w,
            peak_memory_used_bytes: self.peak_memory_used_bytes,
        }
    }
}

/// Count, sum and maximum of one metric.
#[derive(Debug, Default)]
struct Stat {
    n: usize,
    sum: f64,
    max: f64,
}

impl Stat {
    fn add(&mut self, x: f64) {
        self.max = if self.n == 0 { x } else { self.max.max(x) };
        self.n += 1;
        self.sum += x;
    }

    fn mean(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum / self.n as f64
        }
    }
}

#[derive(Debug)]
struct DeviceTally {
    index: u32,
    name: String,
    samples: usize,
    utilization: Stat,
    power: Stat,
    memory_samples: usize,
    peak_memory_used_bytes: u64,
    memory_total_bytes: u64,
    /// The last power sample (t, W), for the next trapezoid.
    last_power: Option<(f64, f64)>,
    integrated_j: f64,
    /// The counter at the first sample and at the latest one (`None` where that sample
    /// lacked it): the counter is used only when both ends have it.
    first_counter_mj: Option<u64>,
    last_counter_mj: Option<u64>,
}

impl DeviceTally {
    fn new(index: u32, name: String) -> Self {
        DeviceTally {
            index,
            name,
            samples: 0,
            utilization: Stat::default(),
            power: Stat::default(),
            memory_samples: 0,
            peak_memory_used_bytes: 0,
            memory_total_bytes: 0,
            last_power: None,
            integrated_j: 0.0,
            first_counter_mj: None,
            last_counter_mj: None,
        }
    }

    fn add(&mut self, t: f64, s: &Sample) {
        if self.samples == 0 {
            self.first_counter_mj = s.energy_mj;
        }
        self.samples += 1;
        self.last_counter_mj = s.energy_mj;
        if let Some(u) = s.utilization_pct {
            self.utilization.add(u);
        }
        if let Some(used) = s.memory_used_bytes {
            self.memory_samples += 1;
            self.peak_memory_used_bytes = self.peak_memory_used_bytes.max(used);
        }
        if let Some(total) = s.memory_total_bytes {
            self.memory_total_bytes = total;
        }
        if let Some(w) = s.power_w {
            self.power.add(w);
            // A sample without power in between is bridged: the trapezoid spans the gap.
            if let Some((t0, w0)) = self.last_power {
                self.integrated_j += (t - t0).max(0.0) * (w0 + w) / 2.0;
            }
            self.last_power = Some((t, w));
        }
    }

    fn report(&self) -> DeviceReport {
        let (energy_j, energy_source) = match (self.first_counter_mj, self.last_counter_mj) {
            // A counter that went down was reset (the driver reloaded): not a delta.
            (Some(first), Some(last)) if last >= first => {
                ((last - first) as f64 / 1000.0, EnergySource::Counter)
            }
            _ if self.power.n > 0 => (self.integrated_j, EnergySource::IntegratedPower),
            _ => (0.0, EnergySource::Unmeasured),
        };
        DeviceReport {
            index: self.index,
            name: self.name.clone(),
            samples: self.samples,
            utilization_samples: self.utilization.n,
            mean_utilization_pct: self.utilization.mean(),
            max_utilization_pct: self.utilization.max,
            memory_samples: self.memory_samples,
            peak_memory_used_bytes: self.peak_memory_used_bytes,
            memory_total_bytes: self.memory_total_bytes,
            power_samples: self.power.n,
            mean_power_w: self.power.mean(),
            max_power_w: self.power.max,
            energy_j,
            energy_source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    const GB: u64 = 1_000_000_000;

    fn full(util: f64, mem: u64, power: f64, counter_mj: u64) -> Sample {
        Sample {
            utilization_pct: Some(util),
            memory_used_bytes: Some(mem),
            memory_total_bytes: Some(80 * GB),
            power_w: Some(power),
            energy_mj: Some(counter_mj),
        }
    }

    fn tally(devices: usize, rounds: &[(f64, Vec<Sample>)]) -> GpuReport {
        let names: Vec<(u32, String)> = (0..devices as u32)
            .map(|i| (i, format!("Fake GPU {i}")))
            .collect();
        let mut t = Tally::new(&names);
        for (at, samples) in rounds {
            t.add(*at, samples);
        }
        t.report()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    /// The absent case, deterministic on any machine: a library that does not exist is
    /// `Unavailable` with one line naming it, not a panic or an error of the run.
    #[test]
    fn absent_library_is_a_one_line_note_naming_it() {
        let missing = "libbench-test-no-such-nvml.so.1";
        let Err(Unavailable {
            note,
            library_absent,
        }) = NvmlSource::open(OsStr::new(missing), &[])
        else {
            panic!("a library that does not exist loaded");
        };
        assert!(
            library_absent,
            "an absent library is told apart from a failing one"
        );
        assert_eq!(
            note,
            format!(
                "GPU telemetry: NVIDIA's management library ({missing}) was not found; no GPU figures"
            )
        );
    }

    /// `start` itself: on a machine without NVML (this one, CI) it is `Unavailable` with
    /// one line naming libnvidia-ml; where NVML and a GPU exist it samples them.
    #[test]
    fn start_without_nvml_is_unavailable_and_never_panics() {
        match start(Duration::from_millis(10)) {
            Err(e) => {
                let note = e.to_string();
                assert!(note.starts_with("GPU telemetry: "), "{note}");
                assert!(note.contains(LIBRARY), "{note}");
                assert!(!note.contains('\n'), "{note}");
            }
            Ok(sampler) => {
                let report = sampler.finish();
                assert!(!report.devices.is_empty());
                assert!(report.devices.iter().all(|d| d.samples >= 2));
            }
        }
    }

    #[test]
    fn energy_is_the_counter_delta_per_device_summed() {
        // Device 0: 1_000_000 mJ → 1_250_500 mJ = 250.5 J; device 1: 5_000 → 105_000 mJ
        // = 100 J. Power samples integrate to something else on purpose.
        let report = tally(
            2,
            &[
                (
                    0.0,
                    vec![full(0.0, GB, 100.0, 1_000_000), full(0.0, GB, 50.0, 5_000)],
                ),
                (
                    1.0,
                    vec![
                        full(50.0, GB, 300.0, 1_100_000),
                        full(50.0, GB, 60.0, 50_000),
                    ],
                ),
                (
                    2.0,
                    vec![
                        full(90.0, GB, 200.0, 1_250_500),
                        full(90.0, GB, 70.0, 105_000),
                    ],
                ),
            ],
        );
        let d = &report.devices;
        assert_eq!(d[0].energy_source, EnergySource::Counter);
        assert_eq!(d[1].energy_source, EnergySource::Counter);
        assert!(close(d[0].energy_j, 250.5), "{}", d[0].energy_j);
        assert!(close(d[1].energy_j, 100.0), "{}", d[1].energy_j);
        assert!(close(report.energy_j(), 350.5));
        assert!(close(report.duration_s, 2.0));
    }

    #[test]
    fn energy_integrates_power_where_the_counter_is_unsupported() {
        let no_counter = |t: f64, w: f64| {
            (
                t,
                vec![Sample {
                    power_w: Some(w),
                    ..Sample::default()
                }],
            )
        };
        // Trapezoids: 0.5 s × (100+200)/2 + 1.5 s × (200+300)/2 = 75 + 375 = 450 J.
        let report = tally(
            1,
            &[
                no_counter(0.0, 100.0),
                no_counter(0.5, 200.0),
                no_counter(2.0, 300.0),
            ],
        );
        assert_eq!(
            report.devices[0].energy_source,
            EnergySource::IntegratedPower
        );
        assert!(close(report.energy_j(), 450.0), "{}", report.energy_j());

        // A sample without power is bridged; a counter missing at the last sample (or one
        // that went backwards, a driver reload) falls back to power too.
        let mut gap = full(0.0, GB, 0.0, 2_000);
        gap.power_w = None;
        let mut end = full(0.0, GB, 300.0, 0);
        end.energy_mj = None;
        let report = tally(
            1,
            &[
                (0.0, vec![full(0.0, GB, 100.0, 1_000)]),
                (1.0, vec![gap]),
                (2.0, vec![end]),
            ],
        );
        assert_eq!(
            report.devices[0].energy_source,
            EnergySource::IntegratedPower
        );
        assert!(close(report.energy_j(), 400.0), "{}", report.energy_j());
        let report = tally(
            1,
            &[
                (0.0, vec![full(0.0, GB, 100.0, 9_000)]),
                (1.0, vec![full(0.0, GB, 100.0, 10)]),
            ],
        );
        assert_eq!(
            report.devices[0].energy_source,
            EnergySource::IntegratedPower
        );
        assert!(close(report.energy_j(), 100.0));
    }

    #[test]
    fn energy_per_token_and_none_without_tokens_or_energy() {
        let report = tally(
            1,
            &[
                (0.0, vec![full(0.0, GB, 100.0, 0)]),
                (1.0, vec![full(0.0, GB, 100.0, 500_000)]),
            ],
        );
        assert_eq!(report.energy_per_token_j(1000), Some(0.5));
        assert_eq!(report.energy_per_token_j(0), None);

        // Neither counter nor power: unmeasured, not 0 J per token.
        let only_util = Sample {
            utilization_pct: Some(10.0),
            ..Sample::default()
        };
        let report = tally(1, &[(0.0, vec![only_util]), (1.0, vec![only_util])]);
        assert_eq!(report.devices[0].energy_source, EnergySource::Unmeasured);
        assert!(!report.energy_measured());
        assert_eq!(report.energy_per_token_j(1000), None);
    }

    #[test]
    fn means_and_peaks_per_device_and_together() {
        let report = tally(
            2,
            &[
                (
                    0.0,
                    vec![full(10.0, 2 * GB, 100.0, 0), full(30.0, 7 * GB, 400.0, 0)],
                ),
                (
                    1.0,
                    vec![full(20.0, 9 * GB, 500.0, 0), full(70.0, 3 * GB, 100.0, 0)],
                ),
                (
                    2.0,
                    vec![full(90.0, 4 * GB, 300.0, 0), full(50.0, 4 * GB, 150.0, 0)],
                ),
            ],
        );
        let (a, b) = (&report.devices[0], &report.devices[1]);
        assert_eq!(
            (a.samples, a.utilization_samples, a.power_samples),
            (3, 3, 3)
        );
        assert!(close(a.mean_utilization_pct, 40.0));
        assert!(close(a.max_utilization_pct, 90.0));
        assert!(close(b.mean_utilization_pct, 50.0));
        assert!(close(b.max_utilization_pct, 70.0));
        assert_eq!(a.peak_memory_used_bytes, 9 * GB);
        assert_eq!(b.peak_memory_used_bytes, 7 * GB);
        assert_eq!(a.memory_total_bytes, 80 * GB);
        assert!(close(a.mean_power_w, 300.0));
        assert!(close(a.max_power_w, 500.0));
        assert!(close(b.mean_power_w, 650.0 / 3.0));
        assert!(close(b.max_power_w, 400.0));
        // Together: the sum of means; peaks of the per-round totals (500, 600,
        // 450 W; 9, 12, 8 GB), not the sum of per-device peaks (900 W, 16 GB).
        assert!(close(report.mean_power_w().unwrap(), 300.0 + 650.0 / 3.0));
        assert_eq!(report.peak_power_w, Some(600.0));
        assert_eq!(report.peak_memory_used_bytes, Some(12 * GB));
        assert_eq!(report.memory_total_bytes(), Some(160 * GB));
        assert!(close(report.mean_utilization_pct().unwrap(), 45.0));
        assert_eq!(report.max_utilization_pct(), Some(90.0));
    }

    #[test]
    fn a_metric_never_reported_is_absent_not_zero() {
        let no_power = Sample {
            utilization_pct: Some(50.0),
            memory_used_bytes: Some(GB),
            memory_total_bytes: Some(80 * GB),
            ..Sample::default()
        };
        let report = tally(1, &[(0.0, vec![no_power]), (1.0, vec![no_power])]);
        assert_eq!(report.devices[0].power_samples, 0);
        assert_eq!(report.mean_power_w(), None);
        assert_eq!(report.peak_power_w, None);
        let keys = report.result_keys(tokens(50, 100));
        assert_eq!(keys["gpu_mean_power_w"], Value::Null);
        assert_eq!(keys["gpu_max_power_w"], Value::Null);
        assert_eq!(keys["gpu_energy_j"], Value::Null);
        assert_eq!(keys["gpu_energy_per_output_token_j"], Value::Null);
        assert_eq!(keys["gpu_energy_per_input_token_j"], Value::Null);
        assert_eq!(keys["gpu_energy_per_token_j"], Value::Null);
        assert_eq!(keys["gpu_devices"][0]["mean_power_w"], Value::Null);
        assert_eq!(keys["gpu_devices"][0]["energy_source"], "unmeasured");
        assert_eq!(keys["gpu_mean_utilization_pct"], json!(50.0));
        let lines = report.console_lines(tokens(50, 100)).join("\n");
        assert!(!lines.contains("power"), "{lines}");
        assert!(!lines.contains("energy"), "{lines}");
        assert!(lines.contains("Mean GPU utilization (%):"), "{lines}");
    }

    fn tokens(input: u64, output: u64) -> TokenTotals {
        TokenTotals { input, output }
    }

    fn two_second_run() -> GpuReport {
        tally(
            1,
            &[
                (0.0, vec![full(40.0, 10 * GB, 200.0, 1_000_000)]),
                (2.0, vec![full(80.0, 20 * GB, 400.0, 1_600_000)]),
            ],
        )
    }

    #[test]
    fn result_keys_hold_the_figures() {
        let keys = two_second_run().result_keys(tokens(1000, 2000));
        let names: Vec<&str> = keys.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "gpu_duration_s",
                "gpu_energy_j",
                "gpu_energy_per_output_token_j",
                "gpu_energy_per_input_token_j",
                "gpu_energy_per_token_j",
                "gpu_mean_power_w",
                "gpu_max_power_w",
                "gpu_mean_utilization_pct",
                "gpu_max_utilization_pct",
                "gpu_peak_memory_used_bytes",
                "gpu_memory_total_bytes",
                "gpu_devices",
            ]
        );
        assert_eq!(keys["gpu_duration_s"], json!(2.0));
        assert_eq!(keys["gpu_energy_j"], json!(600.0));
        // The whole 600 J over each count.
        assert_eq!(keys["gpu_energy_per_output_token_j"], json!(0.3));
        assert_eq!(keys["gpu_energy_per_input_token_j"], json!(0.6));
        assert_eq!(keys["gpu_energy_per_token_j"], json!(0.2));
        assert_eq!(keys["gpu_mean_power_w"], json!(300.0));
        assert_eq!(keys["gpu_max_power_w"], json!(400.0));
        assert_eq!(keys["gpu_mean_utilization_pct"], json!(60.0));
        assert_eq!(keys["gpu_max_utilization_pct"], json!(80.0));
        assert_eq!(keys["gpu_peak_memory_used_bytes"], json!(20 * GB));
        assert_eq!(keys["gpu_memory_total_bytes"], json!(80 * GB));
        assert_eq!(
            keys["gpu_devices"],
            json!([{
                "index": 0,
                "name": "Fake GPU 0",
                "samples": 2,
                "mean_utilization_pct": 60.0,
                "max_utilization_pct": 80.0,
                "peak_memory_used_bytes": 20 * GB,
                "memory_total_bytes": 80 * GB,
                "mean_power_w": 300.0,
                "max_power_w": 400.0,
                "energy_j": 600.0,
                "energy_source": "counter",
            }])
        );
        // Input tokens only (a pooling run): no output figure, the others stay.
        let keys = two_second_run().result_keys(tokens(1000, 0));
        assert_eq!(keys["gpu_energy_per_output_token_j"], Value::Null);
        assert_eq!(keys["gpu_energy_per_input_token_j"], json!(0.6));
        assert_eq!(keys["gpu_energy_per_token_j"], json!(0.6));
    }

    #[test]
    fn console_lines_in_vllm_columns() {
        let lines = two_second_run().console_lines(tokens(1000, 2000));
        let expected = [
            "=================== GPU (NVML) ===================",
            "GPU 0:                                   Fake GPU 0",
            "GPU sampling time (s):                   2.00      ",
            "Mean GPU utilization (%):                60.00     ",
            "Max GPU utilization (%):                 80.00     ",
            "Peak GPU memory used (GiB):              18.63     ",
            "GPU memory total (GiB):                  74.51     ",
            "Mean GPU power (W):                      300.00    ",
            "Max GPU power (W):                       400.00    ",
            "GPU energy (J):                          600.00    ",
            "GPU energy per output token (mJ):        300.00    ",
            "GPU energy per input token (mJ):         600.00    ",
            "GPU energy per token (mJ):               200.00    ",
            "GPU energy from:                         counter   ",
            "==================================================",
        ];
        assert_eq!(lines, expected);
        // No tokens: no per-token line, the rest stays.
        let lines = two_second_run().console_lines(TokenTotals::default());
        assert!(!lines.iter().any(|l| l.contains(" token")));
        assert_eq!(lines.len(), expected.len() - 3);
    }

    #[test]
    fn several_devices_get_a_line_each_and_mixed_sources_say_so() {
        let mut no_counter = full(50.0, GB, 100.0, 0);
        no_counter.energy_mj = None;
        let report = tally(
            2,
            &[
                (0.0, vec![full(50.0, GB, 100.0, 0), no_counter]),
                (1.0, vec![full(50.0, GB, 100.0, 40_000), no_counter]),
            ],
        );
        let lines = report.console_lines(tokens(10, 10));
        for wanted in [
            "GPU 0:                                   Fake GPU 0",
            "GPU 1:                                   Fake GPU 1",
            "GPU energy (J):                          140.00    ",
            "GPU energy from:                         counter, integrated power",
            "GPU 0 energy (J):                        40.00     ",
            "GPU 1 energy (J):                        100.00    ",
        ] {
            assert!(
                lines.iter().any(|l| l == wanted),
                "{wanted:?} not in {lines:#?}"
            );
        }
    }

    /// `read`: a metric the device cannot give is dropped for good; a passing failure
    /// only loses that sample; neither is an error.
    #[test]
    fn a_failing_metric_is_dropped_not_the_run() {
        let mut ask = true;
        assert_eq!(read(&mut ask, || Err::<u32, _>(NvmlError::Unknown)), None);
        assert!(ask, "a passing failure stopped the metric");
        assert_eq!(read(&mut ask, || Ok(7u32)), Some(7));
        assert_eq!(
            read(&mut ask, || Err::<u32, _>(NvmlError::NotSupported)),
            None
        );
        assert!(!ask, "an unsupported metric is asked again");
        let mut called = false;
        assert_eq!(
            read(&mut ask, || {
                called = true;
                Ok(1u32)
            }),
            None
        );
        assert!(!called);
    }

    /// A fake device: the counter climbs 1000 mJ per read, so the energy must be
    /// (samples − 1) J whatever the timing; records the thread each read ran on.
    struct Climbing {
        counter_mj: u64,
        threads: Arc<Mutex<Vec<Option<String>>>>,
    }

    impl Source for Climbing {
        fn sample(&mut self) -> Vec<Sample> {
            let name = std::thread::current().name().map(str::to_string);
            self.threads.lock().unwrap().push(name);
            self.counter_mj += 1000;
            vec![full(50.0, GB, 250.0, self.counter_mj)]
        }
    }

    #[test]
    fn the_sampler_samples_at_start_on_its_thread_and_at_finish() {
        let threads = Arc::new(Mutex::new(Vec::new()));
        let source = Climbing {
            counter_mj: 0,
            threads: Arc::clone(&threads),
        };
        let sampler = spawn(source, vec![(3, "Fake".into())], Duration::from_millis(1))
            .expect("a fake source starts");
        assert_eq!(sampler.devices(), [(3, "Fake".to_string())]);
        assert_eq!(
            sampler.describe(),
            "GPU telemetry: sampling GPU 3 (Fake) every 1 ms"
        );
        let report = sampler.finish();
        let threads = threads.lock().unwrap();
        let d = &report.devices[0];
        assert_eq!(d.index, 3);
        assert!(d.samples >= 2, "start and finish each sample");
        assert_eq!(d.samples, threads.len());
        assert_eq!(d.energy_source, EnergySource::Counter);
        assert!(close(d.energy_j, (d.samples - 1) as f64), "{}", d.energy_j);
        // The first read in `start` on the caller's thread, every later one on bench-gpu.
        assert_ne!(threads[0].as_deref(), Some("bench-gpu"));
        assert!(
            threads[1..]
                .iter()
                .all(|t| t.as_deref() == Some("bench-gpu"))
        );
    }

    #[test]
    fn one_line_folds_newlines() {
        assert_eq!(one_line("a\nb  c\r\n"), "a b c");
    }
}
