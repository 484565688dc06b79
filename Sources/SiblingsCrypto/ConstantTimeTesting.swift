internal import CConstantTime
import Foundation
import Synchronization

/// Hooks for checking constant time with valgrind memcheck (the ctgrind method): tests mark secrets
/// as undefined and memcheck reports every branch or memory index that depends on them. Outside
/// valgrind the hooks do nothing. Tests/ConstantTimeCheck runs them; see docs/crypto-core.md.
@_spi(ConstantTimeTesting)
public enum ConstantTimeTesting {
    /// Whether the process runs under valgrind.
    public static var isRunningOnValgrind: Bool { siblings_ct_running_on_valgrind() != 0 }

    /// Marks the bytes as secret.
    public static func poison(_ buffer: UnsafeRawBufferPointer) {
        guard let base = buffer.baseAddress else { return }
        siblings_ct_poison(base, buffer.count)
    }

    /// Marks the bytes as public (recorded by a running audit as "test").
    public static func declassify(_ buffer: UnsafeRawBufferPointer) {
        declassify(buffer, site: "test")
    }
}

extension ConstantTimeTesting {
    /// One declassification: where it was made (a fixed label per call site) and how many bytes.
    public struct Declassification: Sendable, Equatable, CustomStringConvertible {
        public let site: String
        public let byteCount: Int

        public init(site: String, byteCount: Int) {
            self.site = site
            self.byteCount = byteCount
        }

        public var description: String { "\(site):\(byteCount)" }
    }

    /// The declassifications recorded since ``startDeclassificationAudit()``, in order, or nil when no
    /// audit runs. A declassification is deliberate, so memcheck cannot see a wrong one; the audit lets the
    /// check assert what an operation makes public (ML-DSA signing: per candidate, SampleInBall's "done"
    /// words and one accept/reject word, then the accepted c̃, z and h, and nothing else).
    private static let audit = Mutex<[Declassification]?>(nil)
    private static let auditing = Atomic<Bool>(false)

    /// Starts recording every declassification (process-wide; for the single-threaded check program).
    public static func startDeclassificationAudit() {
        audit.withLock { $0 = [] }
        auditing.store(true, ordering: .sequentiallyConsistent)
    }

    /// Stops recording and returns the declassifications since the start, in order.
    public static func stopDeclassificationAudit() -> [Declassification] {
        auditing.store(false, ordering: .sequentiallyConsistent)
        return audit.withLock { log in
            defer { log = nil }
            return log ?? []
        }
    }

    /// Records one declassification when an audit runs (one relaxed load otherwise).
    @inline(__always)
    static func record(_ site: StaticString, byteCount: Int) {
        guard auditing.load(ordering: .relaxed) else { return }
        audit.withLock { $0?.append(Declassification(site: "\(site)", byteCount: byteCount)) }
    }

    /// Marks the bytes as public and records it under `site` (the library's own declassifications).
    static func declassify(_ buffer: UnsafeRawBufferPointer, site: StaticString) {
        record(site, byteCount: buffer.count)
        guard let base = buffer.baseAddress else { return }
        siblings_ct_declassify(base, buffer.count)
    }

    /// Declassifies one value that an algorithm makes public although it is computed from secrets
    /// (a rejection-sampling decision of ML-DSA signing, for instance), records it under `site`, and
    /// returns it.
    @inline(__always)
    static func declassified<T>(_ value: T, site: StaticString) -> T {
        var copy = value
        withUnsafeBytes(of: &copy) {
            record(site, byteCount: $0.count)
            siblings_ct_declassify($0.baseAddress!, $0.count)
        }
        return copy
    }
}

extension SecureBytes {
    func poison() { withUnsafeBytes { ConstantTimeTesting.poison($0) } }

    /// Marks a secret public where it crosses into OpenSSL's X25519 or Ed25519, which the valgrind check
    /// does not cover (their memcheck reports would be about OpenSSL, not this code); a no-op otherwise.
    func declassifyForOpenSSL() { withUnsafeBytes { ConstantTimeTesting.declassify($0, site: "openssl-boundary") } }
}

@_spi(ConstantTimeTesting)
extension MLKEM768.PrivateKey {
    /// Marks ŝ, z and the seed as secret for the valgrind constant-time check.
    public func poisonSecrets() {
        sHat.poison()
        z.poison()
        seed.poison()
    }
}

@_spi(ConstantTimeTesting)
extension XWing.PrivateKey {
    /// Marks the seed and the ML-KEM part's secrets as secret for the valgrind constant-time check.
    /// (The X25519 scalar lives inside OpenSSL, whose X25519 is outside this check.)
    public func poisonSecrets() {
        seed.poison()
        mlkem.poisonSecrets()
    }
}

@_spi(ConstantTimeTesting)
extension HybridSignature.PrivateKey {
    /// Marks the seed and both halves' secrets as secret for the valgrind constant-time check. (The
    /// Ed25519 seed lives inside OpenSSL too, whose Ed25519 is outside this check.)
    public func poisonSecrets() {
        seed.poison()
        mldsa.poisonSecrets()
    }
}

@_spi(ConstantTimeTesting)
extension MLDSA65.PrivateKey {
    /// Marks the seed, the expanded secret key and the NTT forms of s1, s2 and t0 as secret for the
    /// valgrind constant-time check.
    public func poisonSecrets() {
        seed.poison()
        expanded.poison()
        transformedSecrets.poison()
    }
}
