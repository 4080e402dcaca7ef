//! The spec 2.2 field table (see `schema`): it finds unknown keys, and marks the values that
//! 2.2 accepts only as 3.0 does (hashes, sources, filesystem formats).

use super::schema::Shape::{self, Array, Object};
use super::schema::{Field, f, leaf};
use super::schema_v3::{DROPINS, OWNER, VERIFICATION};

const V2_REFERENCE: Shape = Object(&[
    f("source", 0, Shape::Source),
    f("verification", 0, VERIFICATION),
]);
const V2_NODE_FILE: &[Field] = &[
    leaf("filesystem"),
    f("group", 0, OWNER),
    leaf("overwrite"),
    leaf("path"),
    f("user", 0, OWNER),
    leaf("append"),
    f(
        "contents",
        0,
        Object(&[
            leaf("compression"),
            f("source", 0, Shape::Source),
            f("verification", 0, VERIFICATION),
        ]),
    ),
    leaf("mode"),
];
const V2_NODE_DIR: &[Field] = &[
    leaf("filesystem"),
    f("group", 0, OWNER),
    leaf("overwrite"),
    leaf("path"),
    f("user", 0, OWNER),
    leaf("mode"),
];
const V2_NODE_LINK: &[Field] = &[
    leaf("filesystem"),
    f("group", 0, OWNER),
    leaf("overwrite"),
    leaf("path"),
    f("user", 0, OWNER),
    leaf("hard"),
    leaf("target"),
];
const V2_USER_CREATE: &[Field] = &[
    leaf("gecos"),
    leaf("groups"),
    leaf("homeDir"),
    leaf("noCreateHome"),
    leaf("noLogInit"),
    leaf("noUserGroup"),
    leaf("primaryGroup"),
    leaf("shell"),
    leaf("system"),
    leaf("uid"),
];

/// Spec 2.2.
pub(crate) const V2_2: Shape = Object(&[
    f(
        "ignition",
        0,
        Object(&[
            f(
                "config",
                0,
                Object(&[
                    f("append", 0, Array(&V2_REFERENCE)),
                    f("replace", 0, V2_REFERENCE),
                ]),
            ),
            f(
                "security",
                0,
                Object(&[f(
                    "tls",
                    0,
                    Object(&[f("certificateAuthorities", 0, Array(&V2_REFERENCE))]),
                )]),
            ),
            f(
                "timeouts",
                0,
                Object(&[leaf("httpResponseHeaders"), leaf("httpTotal")]),
            ),
            leaf("version"),
        ]),
    ),
    f(
        "networkd",
        0,
        Object(&[f(
            "units",
            0,
            Array(&Object(&[
                leaf("contents"),
                f("dropins", 0, DROPINS),
                leaf("name"),
            ])),
        )]),
    ),
    f(
        "passwd",
        0,
        Object(&[
            f(
                "groups",
                0,
                Array(&Object(&[
                    leaf("gid"),
                    leaf("name"),
                    leaf("passwordHash"),
                    leaf("system"),
                ])),
            ),
            f(
                "users",
                0,
                Array(&Object(&[
                    f("create", 0, Object(V2_USER_CREATE)),
                    leaf("gecos"),
                    leaf("groups"),
                    leaf("homeDir"),
                    leaf("name"),
                    leaf("noCreateHome"),
                    leaf("noLogInit"),
                    leaf("noUserGroup"),
                    leaf("passwordHash"),
                    leaf("primaryGroup"),
                    leaf("sshAuthorizedKeys"),
                    leaf("shell"),
                    leaf("system"),
                    leaf("uid"),
                ])),
            ),
        ]),
    ),
    f(
        "storage",
        0,
        Object(&[
            f("directories", 0, Array(&Object(V2_NODE_DIR))),
            f(
                "disks",
                0,
                Array(&Object(&[
                    leaf("device"),
                    f(
                        "partitions",
                        0,
                        Array(&Object(&[
                            leaf("guid"),
                            leaf("label"),
                            leaf("number"),
                            leaf("size"),
                            leaf("start"),
                            leaf("typeGuid"),
                        ])),
                    ),
                    leaf("wipeTable"),
                ])),
            ),
            f("files", 0, Array(&Object(V2_NODE_FILE))),
            f(
                "filesystems",
                0,
                Array(&Object(&[
                    f(
                        "mount",
                        0,
                        Object(&[
                            f("create", 0, Object(&[leaf("force"), leaf("options")])),
                            leaf("device"),
                            f("format", 0, Shape::FsFormat),
                            leaf("label"),
                            leaf("options"),
                            leaf("uuid"),
                            leaf("wipeFilesystem"),
                        ]),
                    ),
                    leaf("name"),
                    leaf("path"),
                ])),
            ),
            f("links", 0, Array(&Object(V2_NODE_LINK))),
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
        ]),
    ),
    f(
        "systemd",
        0,
        Object(&[f(
            "units",
            0,
            Array(&Object(&[
                leaf("contents"),
                f("dropins", 0, DROPINS),
                leaf("enable"),
                leaf("enabled"),
                leaf("mask"),
                leaf("name"),
            ])),
        )]),
    ),
]);
