//! The container runtime's image service (CRI `runtime.v1.ImageService`), as the kubelet and
//! the MCD reach it: gRPC over the runtime's unix socket (CRI-O's `/var/run/crio/crio.sock`;
//! containerd's CRI plugin serves the same service), no TLS. [`ImageService`] is the seam:
//! [`CriClient`] on a live node, `FakeImageService` in tests.
//!
//! The client connects lazily and reconnects on its own (a runtime restarting is a failed call,
//! not a broken client), takes replies up to 16 MiB, and reports a failed call as the MCD does
//! (a gRPC `Unknown` status is its message alone, as the runtimes send their errors).

#[cfg(any(test, feature = "fakes"))]
mod fake;
pub mod proto;

use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use hyper_util::rt::TokioIo;
use machine_config::mco::pinned_images::CRI_MAX_MESSAGE;
use machine_config::pull_auth::Credentials;
use tonic::transport::{Channel, Endpoint, Uri};

#[cfg(any(test, feature = "fakes"))]
pub use fake::{FakeImageService, ImageCall};

/// How long a connection attempt may take (the kubelet's minimum).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long an `ImageStatus` may take: a hung runtime fails the sync instead of holding it.
/// A pull has no such limit (a large image on a slow link takes what it takes).
const STATUS_TIMEOUT: Duration = Duration::from_secs(2 * 60);

/// A failed CRI call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CriError {
    /// The call did not get an answer: the socket is missing, refused, or the call timed out.
    #[error("{method} {image}: the container runtime at {socket} did not answer: {message}")]
    Unreachable {
        method: &'static str,
        image: String,
        socket: PathBuf,
        message: String,
    },
    /// The runtime answered with an error (its message as the MCD reports it).
    #[error("{0}")]
    Status(String),
}

/// The image calls the agent makes.
#[async_trait]
pub trait ImageService: Send + Sync {
    /// Whether the runtime has `image`.
    async fn image_present(&self, image: &str) -> Result<bool, CriError>;

    /// Pulls `image` with `auth` (none: anonymously); returns the runtime's reference to it.
    async fn pull(&self, image: &str, auth: Option<&Credentials>) -> Result<String, CriError>;
}

/// [`ImageService`] over gRPC on a unix socket.
#[derive(Clone)]
pub struct CriClient {
    socket: PathBuf,
    channel: Channel,
}

impl CriClient {
    /// A client of the runtime at `socket`; nothing is connected until the first call.
    pub fn new(socket: &Path) -> Self {
        let path = socket.to_path_buf();
        // The URI is a placeholder: the connector below dials the socket.
        let channel = Endpoint::from_static("http://cri.invalid")
            .connect_timeout(CONNECT_TIMEOUT)
            .connect_with_connector_lazy(tower::service_fn(move |_: Uri| {
                let path = path.clone();
                async move {
                    let stream = tokio::net::UnixStream::connect(path).await?;
                    Ok::<_, std::io::Error>(TokioIo::new(stream))
                }
            }));
        CriClient {
            socket: socket.to_path_buf(),
            channel,
        }
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    async fn call<Req, Resp>(
        &self,
        method: &'static str,
        path: &'static str,
        image: &str,
        request: Req,
    ) -> Result<Resp, CriError>
    where
        Req: prost::Message + Send + Sync + 'static,
        Resp: prost::Message + Default + Send + Sync + 'static,
    {
        let unreachable = |message: String| CriError::Unreachable {
            method,
            image: image.to_string(),
            socket: self.socket.clone(),
            message,
        };
        let mut grpc = tonic::client::Grpc::new(self.channel.clone())
            .max_decoding_message_size(CRI_MAX_MESSAGE);
        grpc.ready().await.map_err(|e| unreachable(chain(&e)))?;
        let codec = tonic_prost::ProstCodec::<Req, Resp>::default();
        let path = http::uri::PathAndQuery::from_static(path);
        match grpc.unary(tonic::Request::new(request), path, codec).await {
            Ok(response) => Ok(response.into_inner()),
            Err(status) => Err(status_error(&status, unreachable)),
        }
    }
}

/// A status as the MCD reports it: `Unknown` is the runtime's message, anything else Go's
/// `rpc error: code = C desc = M`; a transport failure is [`CriError::Unreachable`].
fn status_error(status: &tonic::Status, unreachable: impl Fn(String) -> CriError) -> CriError {
    use std::error::Error as _;
    if status.code() == tonic::Code::Unknown && status.source().is_none() {
        return CriError::Status(status.message().to_string());
    }
    if status.source().is_some() {
        // tonic's own statuses for a channel that could not connect or broke mid-call
        return unreachable(format!("{}: {}", status.message(), chain(status)));
    }
    CriError::Status(format!(
        "rpc error: code = {:?} desc = {}",
        status.code(),
        status.message()
    ))
}

fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

#[async_trait]
impl ImageService for CriClient {
    async fn image_present(&self, image: &str) -> Result<bool, CriError> {
        let request = proto::ImageStatusRequest {
            image: Some(proto::ImageSpec {
                image: image.to_string(),
            }),
            verbose: false,
        };
        let call = self.call::<_, proto::ImageStatusResponse>(
            "ImageStatus",
            proto::IMAGE_STATUS,
            image,
            request,
        );
        match tokio::time::timeout(STATUS_TIMEOUT, call).await {
            Ok(response) => Ok(response?.image.is_some()),
            Err(_) => Err(CriError::Unreachable {
                method: "ImageStatus",
                image: image.to_string(),
                socket: self.socket.clone(),
                message: format!("no answer within {STATUS_TIMEOUT:?}"),
            }),
        }
    }

    async fn pull(&self, image: &str, auth: Option<&Credentials>) -> Result<String, CriError> {
        let request = proto::PullImageRequest {
            image: Some(proto::ImageSpec {
                image: image.to_string(),
            }),
            auth: auth.map(|c| proto::AuthConfig {
                username: c.username.clone(),
                password: c.password.clone(),
            }),
        };
        let response: proto::PullImageResponse = self
            .call("PullImage", proto::PULL_IMAGE, image, request)
            .await?;
        if response.image_ref.is_empty() {
            return Err(CriError::Status(format!(
                "imageRef of image {image:?} is not set"
            )));
        }
        Ok(response.image_ref)
    }
}
