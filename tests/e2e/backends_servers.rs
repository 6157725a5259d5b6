//! Backends of the other servers in vLLM's backend list (tgi, tensorrt-llm, sglang,
//! llama.cpp, lmdeploy, deepspeed-mii, scalellm, and vllm), each against the mock speaking
//! its protocol.
