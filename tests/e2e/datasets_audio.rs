//! Audio datasets: `custom_audio` (vLLM's `CustomAudioDataset`) and the clips of `hf`'s ASR
//! sets, end to end through the real binary.
