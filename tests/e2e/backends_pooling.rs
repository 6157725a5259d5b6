//! Embedding, pooling and rerank backends against the mock, and vLLM's embedding metrics.
