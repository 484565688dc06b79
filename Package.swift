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
        .library(name: "Sempere", targets: ["Sempere"]),
        .library(name: "HTTPServer", targets: ["HTTPServer"]),
        .executable(name: "bench", targets: ["bench"]),
        .executable(name: "age-swift", targets: ["age-swift"]),
        .executable(name: "sempere", targets: ["sempere"]),
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
        .systemLibrary(
            name: "CMicroHTTPD",
            pkgConfig: "libmicrohttpd",
            providers: [.apt(["libmicrohttpd-dev"])]
        ),

        // valgrind client requests for the constant-time check (no-ops outside valgrind).
        .target(name: "CConstantTime"),

        // The crypto core: classical primitives on OpenSSL 3.0 (files under OpenSSL/ are the backend),
        // post-quantum ones in Swift.
        .target(name: "SiblingsCrypto", dependencies: ["COpenSSL", "CConstantTime"], swiftSettings: strict),

        // age v1 file encryption (C2SP age spec) on the crypto core; docs/age.md.
        .target(name: "Age", dependencies: ["SiblingsCrypto"], swiftSettings: strict),

        // Sempere: the notes vault (docs/sempere-format.md): the vault model, KeyStore and DeviceKeys, join
        // words, the join QR code.
        .target(name: "Sempere", dependencies: ["Age", "SiblingsCrypto", "CQREncode"], swiftSettings: strict),

        // The HTTP platform under pixie-server (../shared/ARCHITECTURE.md): requests, responses, a router with
        // middleware, an in-memory test client, and a libmicrohttpd server on 127.0.0.1, with streamed bodies and
        // WebSockets (SiblingsCrypto only for the handshake's SHA-1).
        .target(name: "HTTPServer", dependencies: ["CMicroHTTPD", "SiblingsCrypto"], swiftSettings: strict),

        // Command-line parsing in swift-argument-parser's shape, shared by sempere, pixie and pixie-server.
        .target(name: "CommandLineKit", swiftSettings: strict),

        .executableTarget(
            name: "bench", dependencies: ["SiblingsCrypto", "CommandLineKit", "Sempere"], swiftSettings: strict),

        // The Sempere command-line program (README.md, "Sempere from the terminal").
        .executableTarget(name: "sempere", dependencies: ["Sempere", "CommandLineKit"], swiftSettings: strict),

        // The Age module on files, to time beside the age CLI (scripts/bench-age.sh); a benchmark entry point.
        .executableTarget(name: "age-swift", dependencies: ["Age"], swiftSettings: strict),

        // Runs secret-dependent operations with poisoned secrets, for valgrind (ConstantTimeTests).
        .executableTarget(
            name: "ConstantTimeCheck",
            dependencies: ["SiblingsCrypto"],
            path: "Tests/ConstantTimeCheck",
            swiftSettings: strict
        ),

        // The age parser fuzz target (scripts/fuzz-age.sh builds it with libFuzzer).
        .executableTarget(
            name: "AgeFuzzer",
            dependencies: ["Age"],
            path: "Tests/AgeFuzzer",
            swiftSettings: strict
        ),

        // Test support: the one vector loader and the outside-reference oracle; used by tests only.
        .target(
            name: "SiblingsTestSupport",
            dependencies: ["CZlib"],
            path: "Tests/SiblingsTestSupport",
            swiftSettings: strict
        ),
        .testTarget(name: "CommandLineKitTests", dependencies: ["CommandLineKit"], swiftSettings: strict),
        .testTarget(
            name: "SiblingsTestSupportTests",
            dependencies: ["SiblingsTestSupport"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "SiblingsCryptoTests",
            dependencies: ["SiblingsCrypto", "SiblingsTestSupport"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "AgeTests",
            dependencies: ["Age", "SiblingsCrypto", "SiblingsTestSupport"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "HTTPServerTests",
            dependencies: ["HTTPServer", "SiblingsCrypto", "SiblingsTestSupport"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "SempereTests",
            dependencies: ["Sempere", "Age", "SiblingsCrypto", "SiblingsTestSupport"],
            swiftSettings: strict
        ),
    ]
)
