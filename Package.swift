// swift-tools-version:6.0
import PackageDescription

/// Swift 6 language mode with complete strict concurrency for every target; `scripts/test.sh` adds
/// `-warnings-as-errors`.
let strict: [SwiftSetting] = [.swiftLanguageMode(.v6)]

let package = Package(
    name: "Siblings",
    products: [
        .library(name: "SiblingsCrypto", targets: ["SiblingsCrypto"]),
        .library(name: "Age", targets: ["Age"]),
        .library(name: "CommandLineKit", targets: ["CommandLineKit"]),
        .library(name: "Processes", targets: ["Processes"]),
        .library(name: "Sempere", targets: ["Sempere"]),
        .library(name: "PrivateFiles", targets: ["PrivateFiles"]),
        .library(name: "HTTPServer", targets: ["HTTPServer"]),
        .library(name: "WebSockets", targets: ["WebSockets"]),
        .library(name: "PixieWire", targets: ["PixieWire"]),
        .library(name: "Storage", targets: ["Storage"]),
        .library(name: "WebAuthn", targets: ["WebAuthn"]),
        .library(name: "Transparency", targets: ["Transparency"]),
        .library(name: "PrivacyPass", targets: ["PrivacyPass"]),
        .library(name: "PixieDevice", targets: ["PixieDevice"]),
        .executable(name: "bench", targets: ["bench"]),
        .executable(name: "age-swift", targets: ["age-swift"]),
        .executable(name: "sempere", targets: ["sempere"]),
        .executable(name: "pixie", targets: ["pixie"]),
        .executable(name: "pixie-server", targets: ["pixie-server"]),
        .executable(name: "relay-bench", targets: ["relay-bench"]),
        .executable(name: "connection-bench", targets: ["connection-bench"]),
        .executable(name: "signin-bench", targets: ["signin-bench"]),
    ],
    targets: [
        // C libraries from Debian, one `.systemLibrary` each (../shared/STYLE.md, "Wrapping C").
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        .systemLibrary(
            name: "CZlib",
            pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"])]
        ),
        .systemLibrary(
            name: "CQREncode",
            pkgConfig: "libqrencode",
            providers: [.apt(["libqrencode-dev"])]
        ),
        // Linux's epoll(7) and eventfd(2), from the C library itself (Glibc's Swift module leaves them out).
        .systemLibrary(name: "CEpoll"),
        // posix_spawn's closefrom and chdir actions (glibc), for Processes' ChildProcess.
        .systemLibrary(name: "CSpawn"),
        .systemLibrary(name: "CMalloc"),
        .systemLibrary(
            name: "CMicroHTTPD",
            pkgConfig: "libmicrohttpd",
            providers: [.apt(["libmicrohttpd-dev"])]
        ),
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        .systemLibrary(
            name: "CSodium",
            pkgConfig: "libsodium",
            providers: [.apt(["libsodium-dev"])]
        ),
        // The NATS C client: the relay's bus across nodes (NATSRelayBus), and raw pub/sub in relay-bench.
        .systemLibrary(
            name: "CNATS",
            pkgConfig: "libnats",
            providers: [.apt(["libnats-dev"])]
        ),

        // libpq, PostgreSQL's C client: the Storage module's backend for several pixie-server nodes.
        .systemLibrary(
            name: "CPostgreSQL",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),

        // valgrind client requests for the constant-time check (no-ops outside valgrind).
        .target(name: "CConstantTime"),

        // One helper for the C calls every module makes: a call that a signal interrupted (EINTR) is made again
        // (`retryingInterrupts`). Depends on nothing but the C library.
        .target(name: "SystemCalls", swiftSettings: strict),

        // The crypto core: classical primitives on OpenSSL 3.0 (files under OpenSSL/ are the backend),
        // post-quantum ones in Swift.
        .target(name: "SiblingsCrypto", dependencies: ["COpenSSL", "CConstantTime"], swiftSettings: strict),

        // age v1 file encryption (C2SP age spec) on the crypto core; docs/age.md.
        .target(name: "Age", dependencies: ["SiblingsCrypto", "SystemCalls", "Processes"], swiftSettings: strict),

        // Files only this user can read (0700 directories, 0600 files replaced atomically): Sempere's key store
        // and a Pixie device's home.
        .target(name: "PrivateFiles", dependencies: ["SystemCalls"], swiftSettings: strict),

        // Sempere: the notes vault (docs/sempere-format.md): the vault model, KeyStore and DeviceKeys, join
        // words, the join QR code.
        .target(
            name: "Sempere", dependencies: ["Age", "SiblingsCrypto", "CQREncode", "PrivateFiles", "SystemCalls"],
            swiftSettings: strict
        ),

        // The HTTP platform under pixie-server (../shared/ARCHITECTURE.md): requests, responses, a router with
        // middleware, an in-memory test client, and a libmicrohttpd server on 127.0.0.1, with streamed bodies; its
        // upgraded connections go to WebSockets.
        .target(
            name: "HTTPServer", dependencies: ["CMicroHTTPD", "WebSockets", "SiblingsCrypto"], swiftSettings: strict),

        // WebSockets (RFC 6455) on our own epoll event loops, server and client side, without libmicrohttpd: the
        // server hands upgraded sockets to it, and a device's relay session connects with its client.
        .target(name: "WebSockets", dependencies: ["CEpoll", "SiblingsCrypto", "SystemCalls"], swiftSettings: strict),

        // Pixie's wire types shared by server and device: PhoneOwnershipCert, SenderCert, relay frames, the trust
        // bundle, the KT labels and roster commitment, and every JSON body under API/ (docs/pixie-protocol.md).
        .target(
            name: "PixieWire", dependencies: ["SiblingsCrypto", "WebAuthn", "Transparency"], swiftSettings: strict),

        // Storage behind a protocol (SQLDatabase): SQLite in WAL mode, embedded (files under SQLite/), for
        // pixie-server's services and a device's store.
        .target(name: "Storage", dependencies: ["CSQLite"], swiftSettings: strict),

        // The PostgreSQL backend of Storage, through libpq, for several server nodes; only servers link it (a device
        // links no libpq: scripts/module-edges.py checks it).
        .target(name: "StoragePostgreSQL", dependencies: ["Storage", "CPostgreSQL"], swiftSettings: strict),

        // WebAuthn Level 3 relying party (registration and assertion, attestation "none", ES256) and a software
        // ES256 authenticator for devices and tests; docs/webauthn.md.
        .target(name: "WebAuthn", dependencies: ["SiblingsCrypto"], swiftSettings: strict),

        // Key transparency: the append-only Merkle log (RFC 9162), the verifiable map of labels, signed checkpoints
        // (C2SP tlog-checkpoint), proofs, the verifier (device) and the auditor; docs/transparency.md.
        .target(name: "Transparency", dependencies: ["SiblingsCrypto"], swiftSettings: strict),

        // The log's server half: the sequencer and prover, and the log's store in SQL. Only servers link it.
        .target(
            name: "TransparencyLog", dependencies: ["Transparency", "SiblingsCrypto", "Storage"],
            swiftSettings: strict),

        // Privacy Pass-style rate-limit tokens (RFC 9578 shape) on the RFC 9497 VOPRF with ristretto255-SHA512
        // (libsodium's group, SiblingsCrypto's SHA-512), and the served OPRF key list; docs/privacy-pass.md.
        .target(name: "PrivacyPass", dependencies: ["SiblingsCrypto", "CSodium"], swiftSettings: strict),

        // The Pixie device SDK (ARCHITECTURE.md, PixieDevice; docs/pixie-device.md): transport (URLSession, the
        // relay session), trust (the log's verifiers), keys, the token wallet, sign-in on both ends, the device
        // store, credentials and OnboardingFlow.
        .target(
            name: "PixieDevice",
            dependencies: [
                "PixieWire", "PrivacyPass", "Transparency", "WebSockets", "PrivateFiles", "WebAuthn", "Storage",
                "SystemCalls",
            ],
            swiftSettings: strict),

        // pixie-server's services on the HTTP platform: phone-verify-svc and identity-svc, configuration, keys,
        // logs and metrics (docs/pixie-protocol.md, docs/operations.md).
        .target(
            name: "PixieServer",
            dependencies: [
                "HTTPServer", "WebSockets", "Storage", "StoragePostgreSQL", "WebAuthn", "PixieWire", "SiblingsCrypto",
                "Transparency", "TransparencyLog", "PrivacyPass", "CNATS", "SystemCalls",
            ],
            swiftSettings: strict),

        // Command-line parsing in swift-argument-parser's shape, shared by sempere, pixie and pixie-server.
        .target(name: "CommandLineKit", swiftSettings: strict),

        // Process spawning: ChildProcess, a child that inherits its three standard streams and nothing else, for
        // the programs that start others (pixie's sync worker, sempere's editor, bench's `openssl speed`) and the
        // tests.
        .target(
            name: "Processes",
            dependencies: ["SystemCalls", .target(name: "CSpawn", condition: .when(platforms: [.linux]))],
            swiftSettings: strict),

        .executableTarget(
            name: "bench",
            dependencies: [
                "SiblingsCrypto", "CommandLineKit", "Processes", "Sempere", "Storage", "Transparency",
                "TransparencyLog", "PrivacyPass", "PixieServer", "PixieDevice", "PixieWire",
            ],
            swiftSettings: strict),

        // The Pixie backend in one process, or one service alone (README.md, docs/operations.md).
        .executableTarget(
            name: "pixie-server",
            dependencies: ["PixieServer", "PixieDevice", "PixieWire", "CommandLineKit", "Transparency"],
            swiftSettings: strict),

        // Token-gated relay sends beside raw NATS pub/sub, 1 KiB frames, p50/p99 (scripts/bench-relay.sh).
        // The epoll load client of scripts/bench-connections.sh and the relay churn test.
        .executableTarget(
            name: "connection-bench",
            dependencies: [
                "CEpoll", "CommandLineKit", "HTTPServer", "WebSockets", "PixieWire", "SiblingsCrypto", "SystemCalls",
            ],
            swiftSettings: strict),
        .executableTarget(
            name: "relay-bench",
            dependencies: [
                "HTTPServer", "WebSockets", "PixieWire", "CommandLineKit", "PixieServer", "PrivacyPass",
            ],
            swiftSettings: strict),

        // The Sempere command-line program (README.md, "Sempere from the terminal").
        .executableTarget(
            name: "sempere", dependencies: ["Sempere", "CommandLineKit", "Processes"], swiftSettings: strict),

        // A sign-in's machine path and rate against a running pixie-server, as devices make them
        // (scripts/bench-signin.sh; docs/benchmarks.md).
        .executableTarget(
            name: "signin-bench", dependencies: ["PixieDevice", "PixieWire", "CommandLineKit"], swiftSettings: strict),
        // pixie: one Pixie device, its state in --home.
        .executableTarget(
            name: "pixie",
            dependencies: [
                "PixieDevice", "PixieWire", "CommandLineKit", "Processes", "SiblingsCrypto", "PrivateFiles",
                "SystemCalls", .target(name: "CMalloc", condition: .when(platforms: [.linux])),
            ],
            swiftSettings: strict),

        // The Age module on files, to time beside the age CLI (scripts/bench-age.sh); a benchmark entry point.
        .executableTarget(name: "age-swift", dependencies: ["Age"], swiftSettings: strict),

        // Runs secret-dependent operations with poisoned secrets, for valgrind (ConstantTimeTests).
        .executableTarget(
            name: "ConstantTimeCheck",
            dependencies: ["SiblingsCrypto"],
            path: "Tests/ConstantTimeCheck",
            // memcheck suppressions, read by Tests/SiblingsCryptoTests/ConstantTimeTests.swift.
            exclude: ["public-outcomes.supp"],
            swiftSettings: strict
        ),

        // Every fuzz target, one binary, a target chosen by name (scripts/fuzz.sh builds it with libFuzzer and
        // AddressSanitizer; docs/fuzzing.md). Its corpus, one folder per target, is data.
        .executableTarget(
            name: "Fuzzer",
            dependencies: [
                "Age", "PixieDevice", "PixieWire", "PrivacyPass", "Sempere", "SiblingsCrypto", "Transparency",
                "WebAuthn", "WebSockets",
            ],
            path: "Tests/Fuzzer",
            exclude: ["Corpus", "campaign.tsv"],
            swiftSettings: strict
        ),

        // Test support: the one vector loader, the outside-reference oracle, and a database of each backend; used by
        // tests only.
        .target(
            name: "SiblingsTestSupport",
            dependencies: ["CZlib", "Storage", "StoragePostgreSQL", "Processes", "SystemCalls"],
            path: "Tests/SiblingsTestSupport",
            swiftSettings: strict
        ),
        // Test support: the other side of the device SDK's seams: an in-memory relay, a manual clock.
        .target(
            name: "PixieDeviceTestSupport",
            dependencies: ["PixieDevice", "PixieWire", "SiblingsCrypto"],
            path: "Tests/PixieDeviceTestSupport",
            swiftSettings: strict
        ),
        .testTarget(name: "CommandLineKitTests", dependencies: ["CommandLineKit", "Processes"], swiftSettings: strict),
        .testTarget(name: "ProcessesTests", dependencies: ["Processes"], swiftSettings: strict),
        .testTarget(name: "SystemCallsTests", dependencies: ["SystemCalls"], swiftSettings: strict),
        .testTarget(
            name: "SiblingsTestSupportTests",
            dependencies: ["SiblingsTestSupport"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "SiblingsCryptoTests",
            dependencies: ["SiblingsCrypto", "SiblingsTestSupport", "Processes"],
            // Our own pinned vectors (Tests/Reference/pinned_vectors.py), read in place by the tests.
            exclude: ["HPKE/hpke-xwing-vectors.json", "HybridSignature/hybrid-keygen-vectors.json"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "AgeTests",
            dependencies: ["Age", "SiblingsCrypto", "SiblingsTestSupport", "Processes"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "HTTPServerTests",
            dependencies: ["HTTPServer", "WebSockets", "SiblingsCrypto", "SiblingsTestSupport", "Processes"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "PixieWireTests",
            dependencies: ["PixieWire", "SiblingsCrypto", "WebAuthn", "SiblingsTestSupport", "Transparency"],
            swiftSettings: strict),
        .testTarget(
            name: "StorageTests", dependencies: ["Storage", "StoragePostgreSQL", "SiblingsTestSupport"],
            swiftSettings: strict),
        .testTarget(name: "PrivateFilesTests", dependencies: ["PrivateFiles"], swiftSettings: strict),
        .testTarget(
            name: "TransparencyTests",
            dependencies: [
                "Transparency", "TransparencyLog", "Storage", "StoragePostgreSQL", "SiblingsCrypto",
                "SiblingsTestSupport",
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "PixieServerTests",
            dependencies: [
                "PixieServer", "PixieWire", "HTTPServer", "WebSockets", "Storage", "StoragePostgreSQL", "WebAuthn",
                "SiblingsCrypto", "Processes", "Transparency", "TransparencyLog", "PrivacyPass", "PixieDevice",
                "PixieDeviceTestSupport", "SiblingsTestSupport",
            ],
            swiftSettings: strict),
        .testTarget(
            name: "WebAuthnTests",
            dependencies: ["WebAuthn", "SiblingsCrypto", "SiblingsTestSupport"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "PrivacyPassTests",
            dependencies: ["PrivacyPass", "SiblingsCrypto", "SiblingsTestSupport"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "PixieDeviceTests",
            // No PixieServer and no HTTPServer (libmicrohttpd): the device side builds and talks to the server (the
            // binary) without them.
            dependencies: [
                "PixieDevice", "PixieWire", "PrivacyPass", "Transparency", "TransparencyLog", "Storage",
                "SiblingsCrypto",
                "WebSockets", "WebAuthn", "SiblingsTestSupport", "Processes", "PixieDeviceTestSupport",
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "SempereTests",
            dependencies: ["Sempere", "Age", "SiblingsCrypto", "SiblingsTestSupport", "Processes"],
            swiftSettings: strict
        ),
    ]
)
