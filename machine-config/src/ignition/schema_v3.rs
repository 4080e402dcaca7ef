//! The spec 3.0–3.5 field table (see `schema`): each field with the first 3.x minor that knows
//! it, derived by comparing the JSON field sets of Ignition's `config/v3_{0..5}/types/schema.go`.

use super::schema::Shape::{self, Array, Leaf, Object};
use super::schema::{Field, f, leaf};

const HEADERS: Shape = Array(&Object(&[leaf("name"), leaf("value")]));
pub(crate) const VERIFICATION: Shape = Object(&[f("hash", 0, Shape::Hash)]);

/// File contents and append fragments: `compression` since 3.0.
const FILE_RESOURCE: &[Field] = &[
    leaf("compression"),
    f("httpHeaders", 1, HEADERS),
    f("source", 0, Shape::Source),
    f("verification", 0, VERIFICATION),
];
/// Merged/replaced configs and CAs: `compression` since 3.1.
const OTHER_RESOURCE: &[Field] = &[
    f("compression", 1, Leaf),
    f("httpHeaders", 1, HEADERS),
    f("source", 0, Shape::Source),
    f("verification", 0, VERIFICATION),
];
pub(crate) const OWNER: Shape = Object(&[leaf("id"), leaf("name")]);

const V3_IGNITION: &[Field] = &[
    f(
        "config",
        0,
        Object(&[
            f("merge", 0, Array(&Object(OTHER_RESOURCE))),
            f("replace", 0, Object(OTHER_RESOURCE)),
        ]),
    ),
    f(
        "proxy",
        1,
        Object(&[leaf("httpProxy"), leaf("httpsProxy"), leaf("noProxy")]),
    ),
    f(
        "security",
        0,
        Object(&[f(
            "tls",
            0,
            Object(&[f(
                "certificateAuthorities",
                0,
                Array(&Object(OTHER_RESOURCE)),
            )]),
        )]),
    ),
    f(
        "timeouts",
        0,
        Object(&[leaf("httpResponseHeaders"), leaf("httpTotal")]),
    ),
    leaf("version"),
];

const V3_FILE: &[Field] = &[
    f("group", 0, OWNER),
    leaf("overwrite"),
    leaf("path"),
    f("user", 0, OWNER),
    f("append", 0, Array(&Object(FILE_RESOURCE))),
    f("contents", 0, Object(FILE_RESOURCE)),
    f("mode", 0, Shape::Mode),
];
const V3_DIRECTORY: &[Field] = &[
    f("group", 0, OWNER),
    leaf("overwrite"),
    leaf("path"),
    f("user", 0, OWNER),
    f("mode", 0, Shape::Mode),
];
const V3_LINK: &[Field] = &[
    f("group", 0, OWNER),
    leaf("overwrite"),
    leaf("path"),
    f("user", 0, OWNER),
    leaf("hard"),
    leaf("target"),
];
const V3_PARTITION: &[Field] = &[
    leaf("guid"),
    leaf("label"),
    leaf("number"),
    f("resize", 2, Leaf),
    leaf("shouldExist"),
    leaf("sizeMiB"),
    leaf("startMiB"),
    leaf("typeGuid"),
    leaf("wipePartitionEntry"),
];
const V3_LUKS: &[Field] = &[
    f("cex", 5, Object(&[leaf("enabled")])),
    f(
        "clevis",
        2,
        Object(&[
            f(
                "custom",
                2,
                Object(&[leaf("config"), leaf("needsNetwork"), leaf("pin")]),
            ),
            f(
                "tang",
                2,
                Array(&Object(&[
                    f("advertisement", 4, Leaf),
                    leaf("thumbprint"),
                    leaf("url"),
                ])),
            ),
            leaf("threshold"),
            leaf("tpm2"),
        ]),
    ),
    leaf("device"),
    f("discard", 4, Leaf),
    f("keyFile", 2, Object(OTHER_RESOURCE)),
    leaf("label"),
    leaf("name"),
    f("openOptions", 4, Leaf),
    leaf("options"),
    leaf("uuid"),
    leaf("wipeVolume"),
];
const V3_STORAGE: &[Field] = &[
    f("directories", 0, Array(&Object(V3_DIRECTORY))),
    f(
        "disks",
        0,
        Array(&Object(&[
            leaf("device"),
            f("partitions", 0, Array(&Object(V3_PARTITION))),
            leaf("wipeTable"),
        ])),
    ),
    f("files", 0, Array(&Object(V3_FILE))),
    f(
        "filesystems",
        0,
        Array(&Object(&[
            leaf("device"),
            f("format", 0, Shape::FsFormat),
            leaf("label"),
            f("mountOptions", 1, Leaf),
            leaf("options"),
            leaf("path"),
            leaf("uuid"),
            leaf("wipeFilesystem"),
        ])),
    ),
    f("links", 0, Array(&Object(V3_LINK))),
    f("luks", 2, Array(&Object(V3_LUKS))),
    f(
        "raid",
        0,
        Array(&Object(&[
            leaf("devices"),
            leaf("level"),
            leaf("name"),
            leaf("options"),
            leaf("spares"),
        ])),
    ),
];
const V3_USER: &[Field] = &[
    leaf("gecos"),
    leaf("groups"),
    leaf("homeDir"),
    leaf("name"),
    leaf("noCreateHome"),
    leaf("noLogInit"),
    leaf("noUserGroup"),
    leaf("passwordHash"),
    leaf("primaryGroup"),
    leaf("shell"),
    f("shouldExist", 2, Leaf),
    leaf("sshAuthorizedKeys"),
    leaf("system"),
    leaf("uid"),
];
const V3_GROUP: &[Field] = &[
    leaf("gid"),
    leaf("name"),
    leaf("passwordHash"),
    f("shouldExist", 2, Leaf),
    leaf("system"),
];
pub(crate) const DROPINS: Shape = Array(&Object(&[leaf("contents"), leaf("name")]));

/// Spec 3.0–3.5.
pub(crate) const V3: Shape = Object(&[
    f("ignition", 0, Object(V3_IGNITION)),
    f(
        "kernelArguments",
        3,
        Object(&[leaf("shouldExist"), leaf("shouldNotExist")]),
    ),
    f(
        "passwd",
        0,
        Object(&[
            f("groups", 0, Array(&Object(V3_GROUP))),
            f("users", 0, Array(&Object(V3_USER))),
        ]),
    ),
    f("storage", 0, Object(V3_STORAGE)),
    f(
        "systemd",
        0,
        Object(&[f(
            "units",
            0,
            Array(&Object(&[
                leaf("contents"),
                f("dropins", 0, DROPINS),
                leaf("enabled"),
                leaf("mask"),
                leaf("name"),
            ])),
        )]),
    ),
]);
