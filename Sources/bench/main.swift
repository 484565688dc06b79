import CommandLineKit
import Foundation
import Processes
import Sempere
import SiblingsCrypto

/// `bench`: the crypto core's throughput beside OpenSSL's own `openssl speed`, measured in the same run,
/// printed as a Markdown table with the ratio (ours / OpenSSL; 1.00 means no wrapper overhead).
///
/// Usage: bench [--seconds <seconds>] [--rounds <rounds>] [--only <only>] [--entries <entries>] [--self-check-only]
/// docs/benchmarks.md records a run and the command.

struct Bench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Measure the crypto core beside its anchors and print the ratios.",
        discussion: """
            The classic table runs beside `openssl speed` (throughput, Swift / OpenSSL); the post-quantum one \
            beside pyca/cryptography with OpenSSL 4.0 (time, Swift / pyca). Each case alternates with its \
            anchor and keeps each side's best round. docs/benchmarks.md records a run.
            """)

    @Option(name: .long("seconds"), help: "Time each measurement for this many seconds (default 1).")
    var seconds: Double = 1
    @Option(name: .long("rounds"), help: "Alternate ours and the anchor this many times (default 3).")
    var rounds: Int = 3
    @OptionalOption(
        name: .long("only"),
        help: "Only one table: classic, pq, sempere, sempere-search, storage, transparency, tokens or sync.")
    var only: String?
    @Option(name: .long("entries"), help: "Entries in the transparency table's large log (default 1000000).")
    var entries: Int = 1_000_000
    @Flag(name: .long("self-check-only"), help: "Run the self-check and stop.")
    var selfCheckOnly: Bool

    func validate() throws {
        guard seconds > 0 else { throw ValidationError("--seconds must be positive") }
        guard rounds > 0 else { throw ValidationError("--rounds must be at least 1") }
        guard entries >= 100_000 else { throw ValidationError("--entries must be at least 100000") }
        if let only,
            !["classic", "pq", "sempere", "sempere-search", "storage", "transparency", "tokens", "sync"].contains(only)
        {
            throw ValidationError(
                "--only takes classic, pq, sempere, sempere-search, storage, transparency, tokens or sync")
        }
    }

    func run() async throws {
        try selfCheck()
        say("self-check: AES-256-GCM, ChaCha20-Poly1305, Ed25519, ECDSA P-256 and X25519 round trips pass")
        if selfCheckOnly { return }
        if only == nil || only == "classic" { try classicTable(self) }
        if only == nil || only == "pq" { try postQuantumTable(self) }
        if only == nil || only == "sempere" { try sempereTable(self) }
        if only == nil || only == "sempere-search" { try sempereSearchTable(self) }
        if only == nil || only == "storage" { try storageTable(self) }
        if only == nil || only == "transparency" { try await transparencyTable(self) }
        if only == nil || only == "tokens" { try tokenTable(self) }
        if only == nil || only == "sync" { try syncTable(self) }
    }
}

/// Writes a line to standard output at once (`print` buffers when the output is a pipe).
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// Runs `body` repeatedly for about `seconds`; returns operations per second.
func measure(seconds: Double, _ body: () throws -> Void) rethrows -> Double {
    // Warm up (page in buffers, fill caches) before the clock starts.
    for _ in 0..<3 { try body() }
    let clock = ContinuousClock()
    let start = clock.now
    let budget = Duration.milliseconds(Int64(seconds * 1000))
    var operations = 0
    var elapsed = Duration.zero
    repeat {
        for _ in 0..<8 { try body() }
        operations += 8
        elapsed = clock.now - start
    } while elapsed < budget
    let (s, attoseconds) = elapsed.components
    return Double(operations) / (Double(s) + Double(attoseconds) / 1e18)
}

/// `openssl speed` with `arguments`; returns the numbers of its machine-readable `+F` line.
func opensslSpeed(_ arguments: [String]) throws -> [Double] {
    let process = ChildProcess()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["openssl", "speed", "-mr"] + arguments
    let output = Pipe()
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
        throw BenchError(
            "`openssl speed \(arguments.joined(separator: " "))` failed; is the openssl package installed?")
    }
    for line in String(decoding: data, as: UTF8.self).split(separator: "\n") where line.hasPrefix("+F") {
        return line.split(separator: ":").compactMap { Double($0) }.filter { $0 > 0 && $0 != 25 && $0 != 253 }
    }
    throw BenchError("`openssl speed` printed no +F line")
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Round trips through every primitive: the bench refuses to time code that is wrong.
func selfCheck() throws {
    let key = SymmetricKey(size: .bits256)
    let message = Data("siblings self-check".utf8)
    guard try AES.GCM.open(AES.GCM.seal(message, using: key), using: key) == message,
        try ChaChaPoly.open(ChaChaPoly.seal(message, using: key), using: key) == message
    else { throw BenchError("AEAD round trip failed") }
    let signer = Curve25519.Signing.PrivateKey()
    guard signer.publicKey.isValidSignature(try signer.signature(for: message), for: message) else {
        throw BenchError("Ed25519 round trip failed")
    }
    let es256 = P256.Signing.PrivateKey()
    guard es256.publicKey.isValidSignature(try es256.signature(for: message), for: message) else {
        throw BenchError("ECDSA P-256 round trip failed")
    }
    let a = Curve25519.KeyAgreement.PrivateKey()
    let b = Curve25519.KeyAgreement.PrivateKey()
    guard
        try a.sharedSecretFromKeyAgreement(with: b.publicKey).withUnsafeBytes({ Data($0) })
            == b.sharedSecretFromKeyAgreement(with: a.publicKey).withUnsafeBytes({ Data($0) })
    else { throw BenchError("X25519 agreement failed") }
}

struct Case {
    let name: String
    let bytesPerOperation: Int?
    let anchor: String
    let anchorField: Int
    let operation: () throws -> Void

    init(
        _ name: String, bytesPerOperation: Int?, anchor: String, anchorField: Int = 0,
        operation: @escaping () throws -> Void
    ) {
        self.name = name
        self.bytesPerOperation = bytesPerOperation
        self.anchor = anchor
        self.anchorField = anchorField
        self.operation = operation
    }
}

struct Row {
    let operation: String
    let unit: String
    let ours: Double
    let anchor: Double
    let anchorCommand: String
}

func formatted(_ value: Double, unit: String) -> String {
    unit == "GB/s" ? String(format: "%.2f", value / 1e9) : String(format: "%.0f", value)
}

/// The classical primitives beside `openssl speed`, as throughput ratios.
func classicTable(_ options: Bench) throws {
    let seconds = options.seconds
    let secondsArgument = String(max(1, Int(seconds.rounded())))
    let key = SymmetricKey(size: .bits256)
    var cases: [Case] = []

    for size in [16 << 10, 1 << 20] {
        let message = Data(repeating: 0xa5, count: size)
        let label = size == 16 << 10 ? "16 KiB" : "1 MiB"
        // Fixed nonces, as `openssl speed` uses: a nonce costs a CSPRNG call, which the anchor never makes.
        let nonce = AES.GCM.Nonce()
        let chachaNonce = ChaChaPoly.Nonce()
        var output = Data(count: size)
        let bytes = "-bytes \(size)"
        cases.append(
            Case(
                "AES-256-GCM seal, one-shot, \(label)", bytesPerOperation: size,
                anchor: "-aead -evp aes-256-gcm \(bytes)"
            ) {
                _ = try AES.GCM.seal(message, using: key, nonce: nonce)
            })
        cases.append(
            Case(
                "AES-256-GCM seal, streaming 16 KiB pieces, \(label)", bytesPerOperation: size,
                anchor: "-evp aes-256-gcm \(bytes)"
            ) {
                var sealer = try AES.GCM.StreamingSealer(using: key, nonce: nonce)
                var offset = 0
                while offset < size {
                    let piece = min(16 << 10, size - offset)
                    try sealer.update(message[offset..<offset + piece], into: &output)
                    offset += piece
                }
                _ = try sealer.finalize()
            })
        cases.append(
            Case(
                "ChaCha20-Poly1305 seal, one-shot, \(label)", bytesPerOperation: size,
                anchor: "-aead -evp chacha20-poly1305 \(bytes)"
            ) {
                _ = try ChaChaPoly.seal(message, using: key, nonce: chachaNonce)
            })
        cases.append(
            Case("SHA-256, \(label)", bytesPerOperation: size, anchor: "-evp sha256 \(bytes)") {
                _ = SHA256.hash(data: message)
            })
    }
    let signer = Curve25519.Signing.PrivateKey()
    let message = Data(repeating: 7, count: 64)
    let signature = try signer.signature(for: message)
    let publicKey = signer.publicKey
    cases.append(
        Case("Ed25519 sign, 64-byte message", bytesPerOperation: nil, anchor: "ed25519", anchorField: 0) {
            _ = try signer.signature(for: message)
        })
    cases.append(
        Case("Ed25519 verify, 64-byte message", bytesPerOperation: nil, anchor: "ed25519", anchorField: 1) {
            guard publicKey.isValidSignature(signature, for: message) else { throw BenchError("verify failed") }
        })

    // Each case runs `rounds` times, alternating with its anchor, and keeps each side's best round:
    // the machine is shared and noisy, and the best round is the least disturbed one.
    var rows: [Row] = []
    for benchCase in cases {
        var ours = 0.0
        var anchor = 0.0
        for _ in 0..<options.rounds {
            ours = max(
                ours, try measure(seconds: seconds, benchCase.operation) * Double(benchCase.bytesPerOperation ?? 1))
            let fields = try opensslSpeed(
                ["-seconds", secondsArgument] + benchCase.anchor.split(separator: " ").map(String.init))
            anchor = max(anchor, fields[benchCase.anchorField])
        }
        rows.append(
            Row(
                operation: benchCase.name, unit: benchCase.bytesPerOperation == nil ? "op/s" : "GB/s", ours: ours,
                anchor: anchor, anchorCommand: "openssl speed \(benchCase.anchor)"))
    }

    say("")
    say("| operation | unit | Swift | OpenSSL | Swift / OpenSSL | anchor |")
    say("|---|---|---:|---:|---:|---|")
    for row in rows {
        say(
            "| \(row.operation) | \(row.unit) | \(formatted(row.ours, unit: row.unit)) | "
                + "\(formatted(row.anchor, unit: row.unit)) | \(String(format: "%.2f", row.ours / row.anchor)) | "
                + "`\(row.anchorCommand)` |")
    }
}

/// The post-quantum primitives beside pyca/cryptography (OpenSSL 4.0), as time ratios (Swift / pyca;
/// the target is at most 2.0). pyca runs in scripts/bench_anchor_pyca.py under the project's venv.
func postQuantumTable(_ options: Bench) throws {
    let kem = MLKEM768.PrivateKey()
    let kemSeed = kem.seedRepresentation
    let kemCiphertext = try kem.publicKey.encapsulate().encapsulated
    let megabyte = Data(repeating: 0x5a, count: 1 << 20)
    let dsa = MLDSA65.PrivateKey()
    let dsaSeed = dsa.seedRepresentation
    let dsaMessage = Data(repeating: 3, count: 64)
    let dsaSignature = try dsa.signature(for: dsaMessage, context: Data("ctx".utf8))
    let dsaPublic = dsa.publicKey.rawRepresentation
    let xwing = XWing.PrivateKey()
    let xwingSeed = xwing.seedRepresentation
    let xwingCiphertext = try xwing.publicKey.encapsulate().encapsulated
    let cases: [(name: String, bytes: Int?, operation: () throws -> Void)] = [
        ("mlkem768.keygen", nil, { _ = try MLKEM768.PrivateKey(seedRepresentation: kemSeed).publicKey }),
        ("mlkem768.encaps", nil, { _ = try kem.publicKey.encapsulate() }),
        ("mlkem768.decaps", nil, { _ = try kem.decapsulate(kemCiphertext) }),
        ("mldsa65.keygen", nil, { _ = try MLDSA65.PrivateKey(seedRepresentation: dsaSeed).publicKey }),
        ("mldsa65.sign", nil, { _ = try dsa.signature(for: dsaMessage, context: Data("ctx".utf8)) }),
        (
            "mldsa65.verify", nil,
            {
                guard dsa.publicKey.isValidSignature(dsaSignature, for: dsaMessage, context: Data("ctx".utf8)) else {
                    throw BenchError("ML-DSA-65 verification failed")
                }
            }
        ),
        (
            "mldsa65.verify+decode", nil,
            {
                // As a device verifies a key it was just sent: decode the public key, then verify.
                let key = try MLDSA65.PublicKey(rawRepresentation: dsaPublic)
                guard key.isValidSignature(dsaSignature, for: dsaMessage, context: Data("ctx".utf8)) else {
                    throw BenchError("ML-DSA-65 verification failed")
                }
            }
        ),
        ("xwing.keygen", nil, { _ = try XWing.PrivateKey(seedRepresentation: xwingSeed).publicKey }),
        ("xwing.encaps", nil, { _ = try xwing.publicKey.encapsulate() }),
        ("xwing.decaps", nil, { _ = try xwing.decapsulate(xwingCiphertext) }),
        ("shake256.1MiB", 1 << 20, { _ = SHAKE256.hash(data: megabyte, outputByteCount: 32) }),
        ("sha3-256.1MiB", 1 << 20, { _ = SHA3_256.hash(data: megabyte) }),
    ]
    var ours: [String: Double] = [:]
    var anchors: [String: Double] = [:]
    for _ in 0..<options.rounds {
        for item in cases {
            let microseconds = 1e6 / (try measure(seconds: options.seconds, item.operation))
            ours[item.name] = min(ours[item.name] ?? .infinity, microseconds)
        }
        for (name, microseconds) in try pycaAnchors(seconds: options.seconds, names: cases.map(\.name)) {
            anchors[name] = min(anchors[name] ?? .infinity, microseconds)
        }
    }
    say("")
    say("| operation | Swift | pyca (OpenSSL 4.0) | Swift / pyca (time) |")
    say("|---|---:|---:|---:|")
    for item in cases {
        let swift = ours[item.name] ?? .nan
        let anchor = anchors[item.name] ?? .nan
        let shown: (Double) -> String = { value in
            if let bytes = item.bytes { return String(format: "%.0f MB/s", Double(bytes) / value) }
            return String(format: "%.1f µs", value)
        }
        say("| \(item.name) | \(shown(swift)) | \(shown(anchor)) | \(String(format: "%.2f", swift / anchor)) |")
    }
}

/// Runs scripts/bench_anchor_pyca.py once (one round) and returns its µs per operation.
func pycaAnchors(seconds: Double, names: [String]) throws -> [String: Double] {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    let python =
        ProcessInfo.processInfo.environment["SIBLINGS_PYTHON"] ?? root.appendingPathComponent(".venv/bin/python").path
    guard FileManager.default.isExecutableFile(atPath: python) else {
        throw BenchError("no Python venv at \(python): run scripts/setup.sh first (scripts/bench.sh does)")
    }
    let process = ChildProcess()
    process.executableURL = URL(fileURLWithPath: python)
    process.arguments = [
        root.appendingPathComponent("scripts/bench_anchor_pyca.py").path, "--seconds", String(seconds), "--rounds", "1",
        "--only", names.joined(separator: ","),
    ]
    let output = Pipe()
    process.standardOutput = output
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0,
        let object = try JSONSerialization.jsonObject(with: data) as? [String: Double]
    else { throw BenchError("scripts/bench_anchor_pyca.py failed") }
    return object
}

await Bench.main()
