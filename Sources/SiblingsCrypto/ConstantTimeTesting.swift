internal import CConstantTime
import Foundation

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

    /// Marks the bytes as public.
    public static func declassify(_ buffer: UnsafeRawBufferPointer) {
        guard let base = buffer.baseAddress else { return }
        siblings_ct_declassify(base, buffer.count)
    }
}

extension ConstantTimeTesting {
    /// Declassifies one value that an algorithm makes public although it is computed from secrets
    /// (a rejection-sampling decision of ML-DSA signing, for instance), and returns it.
    @inline(__always)
    static func declassified<T>(_ value: T) -> T {
        var copy = value
        withUnsafeBytes(of: &copy) { siblings_ct_declassify($0.baseAddress!, $0.count) }
        return copy
    }
}

extension SecureBytes {
    func poison() { withUnsafeBytes { ConstantTimeTesting.poison($0) } }
}

@_spi(ConstantTimeTesting)
extension MLKEM768.PrivateKey {
    /// Marks ŝ, z and the seed as secret for the valgrind constant-time check.
    public func poisonSecrets() {
        sHat.poison()
        z.poison()
        seed?.poison()
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
extension MLDSA65.PrivateKey {
    /// Marks the seed, the expanded secret key and the NTT forms of s1, s2 and t0 as secret for the
    /// valgrind constant-time check.
    public func poisonSecrets() {
        seed.poison()
        expanded.poison()
        transformedSecrets.poison()
    }
}
