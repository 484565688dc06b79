import Foundation

/// How a TLS endpoint is set up (RFC 8446, TLS 1.3; RFC 5246, TLS 1.2): the names follow swift-nio-ssl's
/// `TLSConfiguration`. A client verifies the server's certificate chain and its name (RFC 9525) against the
/// system's trust store or a private CA, and may pin the server's public key; a server shows a certificate chain.
/// TLS 1.2 is the floor and 1.3 preferred, and the key exchange asks for the hybrid post-quantum group
/// X25519MLKEM768 first, falling back to X25519 where the OpenSSL at run time lacks it (3.0 does; 3.5 has it).
public struct TLSConfiguration: Sendable, Equatable {
    /// Whom a client trusts to vouch for a server.
    public enum Trust: Sendable, Equatable {
        /// The system's trust store (OpenSSL's default paths: `/etc/ssl/certs` on Debian).
        case system
        /// Only the CA certificates (PEM) in this file: a private CA, as `pixie --ca-file` names it.
        case caFile(String)
    }

    public enum Role: Sendable, Equatable {
        case client(trust: Trust, pinnedKeys: [Data])
        case server(certificateChainFile: String, privateKeyFile: String)
    }

    public var role: Role

    /// The key-exchange groups asked for, most wanted first; those the OpenSSL at run time lacks are left out.
    public static let preferredGroups = ["X25519MLKEM768", "X25519", "P-256"]

    /// A client trusting `trust`. `pinnedKeys` (SHA-256 of a certificate's SubjectPublicKeyInfo, DER, as RFC 7469
    /// computes a pin), when not empty, are the only keys accepted anywhere in the verified chain: for an app that
    /// ships its server's key.
    public static func client(trust: Trust = .system, pinnedKeys: [Data] = []) -> TLSConfiguration {
        TLSConfiguration(role: .client(trust: trust, pinnedKeys: pinnedKeys))
    }

    /// A server showing the chain in `certificateChainFile` (PEM, leaf first) with the key in `privateKeyFile`.
    public static func server(certificateChainFile: String, privateKeyFile: String) -> TLSConfiguration {
        TLSConfiguration(role: .server(certificateChainFile: certificateChainFile, privateKeyFile: privateKeyFile))
    }
}

/// Why a TLS connection could not be made or went on no further. Each names the server and what to do; none is a
/// raw OpenSSL message (that is kept, for the log, in ``detail``).
public struct TLSError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// The certificate chain leads to no CA this client trusts.
        case untrusted
        /// The certificate is not for the name (or IP address) the client asked for.
        case wrongHost
        /// The certificate's validity ended.
        case expired
        /// The certificate's validity has not begun (or this machine's clock is behind).
        case notYetValid
        /// The chain verified, but no key in it is one of the pinned keys.
        case pinMismatch
        /// The other side does not speak TLS (a plain HTTP server on the port, for one).
        case notTLS
        /// The handshake failed otherwise (no common version, cipher or group; an alert from the peer).
        case handshakeFailed
        /// The peer closed the connection (cleanly, or in the middle of a record).
        case closed
        /// The local setup is wrong: a CA file, certificate or key that cannot be read.
        case configuration
    }

    public let kind: Kind
    public let message: String
    /// OpenSSL's own words, for a log; never shown to a person as the reason.
    public let detail: String

    public init(_ kind: Kind, _ message: String, detail: String = "") {
        self.kind = kind
        self.message = message
        self.detail = detail
    }

    public var description: String { message }

    public static func == (lhs: TLSError, rhs: TLSError) -> Bool { lhs.kind == rhs.kind && lhs.message == rhs.message }
}
