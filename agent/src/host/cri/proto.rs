//! The messages of the CRI image service (`runtime.v1`, k8s.io/cri-api) this agent sends and
//! reads, declared with prost's derive: only the fields used, with the proto's field numbers
//! (a field left out here is skipped when decoding, as protobuf allows).

/// `runtime.v1.ImageSpec`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ImageSpec {
    #[prost(string, tag = "1")]
    pub image: String,
}

/// `runtime.v1.ImageStatusRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ImageStatusRequest {
    #[prost(message, optional, tag = "1")]
    pub image: Option<ImageSpec>,
    #[prost(bool, tag = "2")]
    pub verbose: bool,
}

/// `runtime.v1.Image` (what is read of it).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Image {
    #[prost(string, tag = "1")]
    pub id: String,
    #[prost(uint64, tag = "4")]
    pub size: u64,
    #[prost(bool, tag = "8")]
    pub pinned: bool,
}

/// `runtime.v1.ImageStatusResponse`: `image` is unset when the runtime does not have it.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ImageStatusResponse {
    #[prost(message, optional, tag = "1")]
    pub image: Option<Image>,
}

/// `runtime.v1.AuthConfig`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AuthConfig {
    #[prost(string, tag = "1")]
    pub username: String,
    #[prost(string, tag = "2")]
    pub password: String,
}

/// `runtime.v1.PullImageRequest` (no sandbox config, as the MCD sends it).
#[derive(Clone, PartialEq, prost::Message)]
pub struct PullImageRequest {
    #[prost(message, optional, tag = "1")]
    pub image: Option<ImageSpec>,
    #[prost(message, optional, tag = "2")]
    pub auth: Option<AuthConfig>,
}

/// `runtime.v1.PullImageResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PullImageResponse {
    #[prost(string, tag = "1")]
    pub image_ref: String,
}

/// The service's methods, as gRPC paths.
pub const IMAGE_STATUS: &str = "/runtime.v1.ImageService/ImageStatus";
pub const PULL_IMAGE: &str = "/runtime.v1.ImageService/PullImage";

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;

    #[test]
    fn field_numbers_are_the_cri_apis() {
        // ImageStatusRequest{image: {image: "a"}}: field 1 (length-delimited) holding field 1.
        let req = ImageStatusRequest {
            image: Some(ImageSpec { image: "a".into() }),
            verbose: false,
        };
        assert_eq!(req.encode_to_vec(), [0x0a, 0x03, 0x0a, 0x01, b'a']);
        let pull = PullImageRequest {
            image: Some(ImageSpec { image: "i".into() }),
            auth: Some(AuthConfig {
                username: "u".into(),
                password: "p".into(),
            }),
        };
        assert_eq!(
            pull.encode_to_vec(),
            [
                0x0a, 0x03, 0x0a, 0x01, b'i', 0x12, 0x06, 0x0a, 0x01, b'u', 0x12, 0x01, b'p'
            ]
        );
        // A response with fields this agent does not declare (repo_tags = 2, spec = 7) decodes.
        let image = [
            0x0a, 0x02, b'i', b'd', 0x12, 0x01, b't', 0x20, 0x07, 0x3a, 0x00, 0x40, 0x01,
        ];
        let mut body = vec![0x0a, image.len() as u8];
        body.extend_from_slice(&image);
        let got = ImageStatusResponse::decode(body.as_slice()).unwrap();
        assert_eq!(
            got.image,
            Some(Image {
                id: "id".into(),
                size: 7,
                pinned: true
            })
        );
        assert_eq!(ImageStatusResponse::decode(&[][..]).unwrap().image, None);
    }
}
