//! Providers that need no network: [`EchoModel`], the daemon's default when no endpoint is
//! configured (semantics §7.4), and [`RandomTextModel`], whose every answer differs, so tests can
//! prove that replay serves the recorded answer instead of calling the model again.

use std::sync::{Mutex, PoisonError};

use agentsessions_api::{
    self as api, DeltaSink, Message, ModelProvider, ModelRequest, ModelResponse, Usage,
};
use async_trait::async_trait;

/// Answers `"echo:"` followed by the text of the request's last message.
#[derive(Debug, Clone, Copy, Default)]
pub struct EchoModel;

impl EchoModel {
    /// The provider name.
    pub const NAME: &str = "offline-echo";
    /// The only model it serves.
    pub const MODEL: &str = "echo";

    /// An echo provider.
    pub fn new() -> Self {
        Self
    }
}

#[async_trait]
impl ModelProvider for EchoModel {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn default_model(&self) -> &str {
        Self::MODEL
    }

    /// Never streams and never fails; an empty request echoes `"echo:"`.
    async fn complete(
        &self,
        request: &ModelRequest,
        _deltas: Option<&dyn DeltaSink>,
    ) -> api::Result<ModelResponse> {
        let last = request
            .messages
            .last()
            .map(Message::text)
            .unwrap_or_default();
        Ok(ModelResponse {
            message: Message::text_message("assistant", format!("echo:{last}")),
            usage: Usage {
                model: served_model(request, Self::MODEL),
                ..Usage::default()
            },
        })
    }
}

/// Answers a few random words, different on every call, from a sequence fixed by its seed: two
/// models with the same seed give the same answers in the same order.
///
/// The sequence advances once per call, whatever the request says, so it is the number of calls
/// (not their content) that decides each answer; that is what lets a test tell a replayed answer
/// from a fresh one.
#[derive(Debug)]
pub struct RandomTextModel {
    state: Mutex<u64>,
}

/// Words the random model picks from.
const WORDS: [&str; 32] = [
    "amber", "basil", "cobalt", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper",
    "kelp", "lumen", "maple", "nectar", "onyx", "pebble", "quartz", "raven", "saffron", "tundra",
    "umber", "velvet", "willow", "xenon", "yarrow", "zephyr", "anchor", "bramble", "cinder",
    "dune", "echo", "flint",
];

impl RandomTextModel {
    /// The provider name.
    pub const NAME: &str = "offline-random";
    /// The model it reports when a request names none.
    pub const MODEL: &str = "random";

    /// A model whose answers follow from `seed`.
    pub fn new(seed: u64) -> Self {
        Self {
            state: Mutex::new(seed),
        }
    }

    /// The next answer's words; the lock is held only to step the generator, never across an
    /// await.
    fn next_words(&self) -> Vec<&'static str> {
        // The state is a plain integer, always valid, so a poisoned lock is still usable.
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let count = 4 + pick(&mut state, 12);
        (0..count)
            .map(|_| WORDS[pick(&mut state, WORDS.len())])
            .collect()
    }
}

#[async_trait]
impl ModelProvider for RandomTextModel {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn default_model(&self) -> &str {
        Self::MODEL
    }

    /// Streams one chunk per word when `deltas` is given; never fails.
    async fn complete(
        &self,
        request: &ModelRequest,
        deltas: Option<&dyn DeltaSink>,
    ) -> api::Result<ModelResponse> {
        let words = self.next_words();
        let text = words.join(" ");
        if let Some(sink) = deltas {
            for (i, word) in words.iter().enumerate() {
                let chunk = if i == 0 {
                    (*word).to_owned()
                } else {
                    format!(" {word}")
                };
                sink.chunk(0, &chunk);
            }
        }
        let input_words = request
            .messages
            .iter()
            .map(|m| m.text().split_whitespace().count())
            .sum::<usize>();
        Ok(ModelResponse {
            message: Message::text_message("assistant", text),
            usage: Usage {
                model: served_model(request, Self::MODEL),
                input_tokens: i64::try_from(input_words).unwrap_or(i64::MAX),
                output_tokens: i64::try_from(words.len()).unwrap_or(i64::MAX),
                ..Usage::default()
            },
        })
    }
}

/// The model a usage record names: the requested one, or the provider's own.
fn served_model(request: &ModelRequest, default: &str) -> String {
    if request.model.is_empty() {
        default.to_owned()
    } else {
        request.model.clone()
    }
}

/// A number below `bound`, from one SplitMix64 step: tiny, fast, and fixed forever, unlike a
/// library generator whose output may change between versions.
fn pick(state: &mut u64, bound: usize) -> usize {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    let bound = u64::try_from(bound).unwrap_or(u64::MAX);
    usize::try_from(z % bound).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    // semantics §7.4: "echo:" + text of the last request message, role assistant.
    #[tokio::test]
    async fn echo_repeats_the_last_message() {
        let request = ModelRequest {
            messages: vec![
                Message::text_message("user", "first"),
                Message::text_message("user", "second"),
            ],
            ..ModelRequest::default()
        };
        let response = EchoModel::new().complete(&request, None).await.unwrap();
        assert_eq!(
            response.message,
            Message::text_message("assistant", "echo:second")
        );
        assert_eq!(response.usage.model, "echo");
        assert_eq!(response.usage.output_tokens, 0);
    }

    // brief: the random model's output differs from call to call…
    #[tokio::test]
    async fn random_model_differs_between_calls() {
        let model = RandomTextModel::new(7);
        let request = ModelRequest::default();
        let first = model.complete(&request, None).await.unwrap();
        let second = model.complete(&request, None).await.unwrap();
        assert_ne!(first.message, second.message);
        assert_eq!(first.message.role, "assistant");
        assert!(!first.message.text().is_empty());
    }

    // …and is reproducible from its seed, call by call; a different seed gives other text.
    #[tokio::test]
    async fn random_model_is_reproducible_from_its_seed() {
        let request = ModelRequest::default();
        let (a, b, c) = (
            RandomTextModel::new(42),
            RandomTextModel::new(42),
            RandomTextModel::new(43),
        );
        for _ in 0..5 {
            let x = a.complete(&request, None).await.unwrap();
            let y = b.complete(&request, None).await.unwrap();
            let z = c.complete(&request, None).await.unwrap();
            assert_eq!(x, y);
            assert_ne!(x.message, z.message);
        }
    }

    struct Chunks(Mutex<Vec<(i32, String)>>);

    impl DeltaSink for Chunks {
        fn chunk(&self, part_index: i32, text: &str) {
            self.0.lock().unwrap().push((part_index, text.to_owned()));
        }
    }

    // semantics §2.7: the streamed chunks add up to the final message, which is the same whether
    // or not anyone watched.
    #[tokio::test]
    async fn random_model_streams_the_same_answer() {
        let request = ModelRequest::default();
        let sink = Chunks(Mutex::new(Vec::new()));
        let streamed = RandomTextModel::new(9)
            .complete(&request, Some(&sink))
            .await
            .unwrap();
        let plain = RandomTextModel::new(9)
            .complete(&request, None)
            .await
            .unwrap();
        assert_eq!(streamed, plain);
        let chunks = sink.0.into_inner().unwrap();
        assert!(chunks.len() > 1);
        assert!(
            chunks
                .iter()
                .all(|(index, text)| *index == 0 && !text.is_empty())
        );
        let joined: String = chunks.into_iter().map(|(_, text)| text).collect();
        assert_eq!(joined, plain.message.text());
    }

    // SplitMix64 reference output for seed 0 (first value 0xe220a8397b1dcdaf).
    #[test]
    fn generator_is_splitmix64() {
        let mut state = 0;
        assert_eq!(
            pick(&mut state, usize::MAX),
            0xe220_a839_7b1d_cdaf % usize::MAX
        );
    }
}
