internal import COpenSSL
import Foundation

/// An `SSL_CTX`: the settings every connection made from it shares (``TLSConfiguration``). Immutable once made,
/// so it is shared across threads, as OpenSSL allows.
public final class TLSContext: @unchecked Sendable {
    let context: OpaquePointer
    public let configuration: TLSConfiguration
    /// The groups this OpenSSL offers, in order: X25519MLKEM768 first when it has it.
    public let offeredGroups: [String]

    public init(_ configuration: TLSConfiguration) throws(TLSError) {
        let (context, groups) = try Self.make(configuration)
        self.context = context
        self.configuration = configuration
        offeredGroups = groups
    }

    /// A new `SSL_CTX` set up as `configuration` says, and the groups it offers; freed again if any step fails.
    private static func make(_ configuration: TLSConfiguration) throws(TLSError) -> (OpaquePointer, [String]) {
        let method: OpaquePointer?
        switch configuration.role {
        case .client: method = TLS_client_method()
        case .server: method = TLS_server_method()
        }
        guard let method, let context = SSL_CTX_new(method) else {
            throw TLSError(.configuration, "OpenSSL could not make a TLS context", detail: OpenSSLError.drainQueue())
        }
        // TLS 1.2 is the floor; OpenSSL prefers the highest version both sides speak (1.3).
        guard COpenSSL_SSL_CTX_set_min_proto_version(context, COpenSSL_TLS1_2_VERSION()) == 1 else {
            SSL_CTX_free(context)
            throw TLSError(.configuration, "OpenSSL refused TLS 1.2 as the floor", detail: OpenSSLError.drainQueue())
        }
        // Each group this OpenSSL knows, in the preferred order: 3.0 lacks X25519MLKEM768, and a list naming it
        // would be refused whole.
        var groups: [String] = []
        for group in TLSConfiguration.preferredGroups where COpenSSL_SSL_CTX_set1_groups_list(context, group) == 1 {
            groups.append(group)
        }
        OpenSSLError.clearQueue()
        guard !groups.isEmpty, COpenSSL_SSL_CTX_set1_groups_list(context, groups.joined(separator: ":")) == 1 else {
            SSL_CTX_free(context)
            throw TLSError(.configuration, "OpenSSL offers none of the key-exchange groups asked for")
        }
        _ = COpenSSL_SSL_CTX_release_buffers(context)
        switch configuration.role {
        case .client(let trust, _):
            SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
            let loaded: Int32
            switch trust {
            case .system: loaded = SSL_CTX_set_default_verify_paths(context)
            case .caFile(let path): loaded = SSL_CTX_load_verify_locations(context, path, nil)
            }
            guard loaded == 1 else {
                SSL_CTX_free(context)
                let what = if case .caFile(let path) = trust { "the CA file \(path)" } else { "the system trust store" }
                throw TLSError(
                    .configuration, "\(what) could not be read as PEM certificates: check the path and its contents",
                    detail: OpenSSLError.drainQueue())
            }
        case .server(let chain, let key):
            _ = COpenSSL_SSL_CTX_no_session_cache(context)
            guard SSL_CTX_use_certificate_chain_file(context, chain) == 1 else {
                SSL_CTX_free(context)
                throw TLSError(
                    .configuration, "the certificate chain \(chain) could not be read: it should be PEM, leaf first",
                    detail: OpenSSLError.drainQueue())
            }
            guard SSL_CTX_use_PrivateKey_file(context, key, SSL_FILETYPE_PEM) == 1,
                SSL_CTX_check_private_key(context) == 1
            else {
                SSL_CTX_free(context)
                throw TLSError(
                    .configuration, "the private key \(key) could not be read, or is not the certificate's key",
                    detail: OpenSSLError.drainQueue())
            }
        }
        return (context, groups)
    }

    deinit { SSL_CTX_free(context) }
}

/// One TLS connection with no I/O of its own (the shape of swift-nio-ssl's handler, without NIO): the bytes from
/// the network go in with ``receive(_:)``, the bytes for the network come out of ``takeOutput()``, and between them
/// the handshake (``handshake()``), application data (``write(_:)``, ``read()``) and the close. OpenSSL works on
/// two memory BIOs, so the caller's socket, event loop or test pump is all the I/O there is.
///
/// Not thread-safe: one owner drives it.
public final class TLSEngine {
    private let ssl: OpaquePointer
    private let input: OpaquePointer
    private let output: OpaquePointer
    private let context: TLSContext
    /// The name the client asked for: a host name, or an IP address literal.
    public let serverName: String?
    private var firstByte: UInt8?
    public private(set) var isHandshakeComplete = false

    /// A client engine for `serverName`: its certificate must name it (a DNS name, or for an address literal such
    /// as `127.0.0.1`, an IP address entry), and a DNS name is sent as SNI.
    public convenience init(client context: TLSContext, serverName: String) throws(TLSError) {
        try self.init(context: context, serverName: serverName)
    }

    /// A server engine.
    public convenience init(server context: TLSContext) throws(TLSError) {
        try self.init(context: context, serverName: nil)
    }

    private init(context: TLSContext, serverName: String?) throws(TLSError) {
        guard let ssl = SSL_new(context.context) else {
            throw TLSError(.configuration, "OpenSSL could not make a TLS connection", detail: OpenSSLError.drainQueue())
        }
        guard let input = BIO_new(BIO_s_mem()) else {
            SSL_free(ssl)
            throw TLSError(.configuration, "OpenSSL could not make memory buffers", detail: OpenSSLError.drainQueue())
        }
        guard let output = BIO_new(BIO_s_mem()) else {
            BIO_free(input)
            SSL_free(ssl)
            throw TLSError(.configuration, "OpenSSL could not make memory buffers", detail: OpenSSLError.drainQueue())
        }
        SSL_set_bio(ssl, input, output)  // the SSL owns both from here
        if let serverName {
            SSL_set_connect_state(ssl)
            let isAddress = Self.isAddressLiteral(serverName)
            let named: Int32 =
                isAddress
                ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), serverName)
                : SSL_set1_host(ssl, serverName)
            guard named == 1, isAddress || COpenSSL_SSL_set_tlsext_host_name(ssl, serverName) == 1 else {
                SSL_free(ssl)
                throw TLSError(
                    .configuration, "\(serverName) cannot be checked as a server name",
                    detail: OpenSSLError.drainQueue())
            }
        } else {
            SSL_set_accept_state(ssl)
        }
        // Stored last: a throw above frees the SSL itself, and no deinit runs for it.
        self.ssl = ssl
        self.input = input
        self.output = output
        self.context = context
        self.serverName = serverName
    }

    deinit { SSL_free(ssl) }

    static func isAddressLiteral(_ name: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, name, &v4) == 1 || inet_pton(AF_INET6, name, &v6) == 1
    }

    /// Bytes that came from the network.
    public func receive(_ bytes: Data) {
        guard !bytes.isEmpty else { return }
        if firstByte == nil { firstByte = bytes.first }
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = BIO_write(
                    input, buffer.baseAddress!.advanced(by: offset), Int32(min(buffer.count - offset, Int(Int32.max))))
                guard written > 0 else { break }
                offset += Int(written)
            }
        }
    }

    /// The bytes to send to the network now (handshake records, sealed data, alerts); empty when there are none.
    public func takeOutput() -> Data {
        let pending = COpenSSL_BIO_pending(output)
        guard pending > 0 else { return Data() }
        var out = Data(count: pending)
        let read = out.withUnsafeMutableBytes { BIO_read(output, $0.baseAddress, Int32(pending)) }
        return read > 0 ? out.prefix(Int(read)) : Data()
    }

    /// Takes the handshake as far as the bytes received allow: true once it is complete (and, for a client, the
    /// chain, the name and any pin checked); false while it waits for more from the peer. Throws why it failed.
    @discardableResult
    public func handshake() throws(TLSError) -> Bool {
        guard !isHandshakeComplete else { return true }
        let result = SSL_do_handshake(ssl)
        guard result == 1 else {
            let error = SSL_get_error(ssl, result)
            if error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE {
                OpenSSLError.clearQueue()
                return false
            }
            throw handshakeError(error)
        }
        try checkPins()
        isHandshakeComplete = true
        return true
    }

    /// Whether the peer closed the connection with a close_notify alert (RFC 8446, section 6.1): a clean end, not a
    /// cut.
    public var receivedCloseNotify: Bool { SSL_get_shutdown(ssl) & Int32(SSL_RECEIVED_SHUTDOWN) != 0 }

    /// The TLS version agreed on, as OpenSSL names it (`TLSv1.3`).
    public var protocolVersion: String { String(cString: SSL_get_version(ssl)) }

    /// The key-exchange group agreed on (`X25519MLKEM768`, `X25519`), once the handshake is complete.
    public var agreedGroup: String? {
        let nid = COpenSSL_SSL_get_negotiated_group(ssl)
        guard nid != 0, let name = SSL_group_to_name(ssl, nid) else { return nil }
        // OpenSSL 3.0 names X25519 in lower case: said as the groups list names it.
        let agreed = String(cString: name)
        return TLSConfiguration.preferredGroups.first { $0.lowercased() == agreed.lowercased() } ?? agreed
    }

    /// Seals `plaintext` for the peer (its records come out of ``takeOutput()``).
    public func write(_ plaintext: Data) throws(TLSError) {
        guard !plaintext.isEmpty else { return }
        var failure: TLSError?
        plaintext.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let chunk = Int32(min(buffer.count - offset, 1 << 20))
                var written = 0
                let result = SSL_write_ex(ssl, buffer.baseAddress!.advanced(by: offset), Int(chunk), &written)
                guard result == 1 else {
                    failure = TLSError(
                        .closed, "the TLS connection\(self.named) can no longer send", detail: OpenSSLError.drainQueue()
                    )
                    return
                }
                offset += written
            }
        }
        if let failure { throw failure }
    }

    /// The application data the bytes received so far complete; empty when a record is still incomplete. Throws
    /// ``TLSError/Kind/closed`` once the peer has closed (cleanly, or with a record cut or forged).
    public func read() throws(TLSError) -> Data {
        var out = Data()
        while true {
            var count = 0
            // A scratch record on the stack: nothing allocated or zeroed per call.
            let result = withUnsafeTemporaryAllocation(byteCount: 16 << 10, alignment: 16) { buffer in
                let result = SSL_read_ex(ssl, buffer.baseAddress, buffer.count, &count)
                if result == 1 { out.append(buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), count: count) }
                return result
            }
            if result == 1 { continue }
            let error = SSL_get_error(ssl, 0)
            if error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE {
                OpenSSLError.clearQueue()
                return out
            }
            if !out.isEmpty { return out }
            if error == SSL_ERROR_ZERO_RETURN {
                throw TLSError(
                    .closed, "the \(serverName == nil ? "client" : "server")\(named) closed the TLS connection")
            }
            throw TLSError(
                .closed, "the TLS connection\(named) broke: a record was cut short or did not authenticate",
                detail: OpenSSLError.drainQueue())
        }
    }

    /// Sends a close_notify (it comes out of ``takeOutput()``).
    public func close() {
        _ = SSL_shutdown(ssl)
        OpenSSLError.clearQueue()
    }

    private var named: String { serverName.map { " to \($0)" } ?? "" }

    /// What a failed handshake means for the person, from the certificate check's result and what the peer sent.
    private func handshakeError(_ error: Int32) -> TLSError {
        let detail = OpenSSLError.drainQueue()
        let server = serverName ?? "the peer"
        let verify = SSL_get_verify_result(ssl)
        switch Int32(verify) {
        case X509_V_OK: break
        case X509_V_ERR_CERT_HAS_EXPIRED:
            return TLSError(
                .expired,
                "the certificate of \(server) has expired: its operator must renew it (or this machine's clock is ahead)",
                detail: detail)
        case X509_V_ERR_CERT_NOT_YET_VALID:
            return TLSError(
                .notYetValid,
                "the certificate of \(server) is not valid yet: check this machine's clock", detail: detail)
        case X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH:
            return TLSError(
                .wrongHost,
                "the certificate \(server) showed is not for \(server): check the server address, or the server's "
                    + "certificate", detail: detail)
        default:
            let reason = String(cString: X509_verify_cert_error_string(verify))
            return TLSError(
                .untrusted,
                "the certificate of \(server) is not signed by a CA this device trusts (\(reason)): for a private CA, "
                    + "pass its certificate with --ca-file", detail: detail)
        }
        if let firstByte, firstByte != 0x16, firstByte != 0x15 {
            return TLSError(
                .notTLS,
                "\(server) does not speak TLS on that port (is it a plain http:// server?): use its https:// address",
                detail: detail)
        }
        if error == SSL_ERROR_SYSCALL || error == SSL_ERROR_ZERO_RETURN {
            return TLSError(.closed, "\(server) closed the connection during the TLS handshake", detail: detail)
        }
        return TLSError(
            .handshakeFailed,
            "the TLS handshake with \(server) failed: it offers no TLS 1.2 or 1.3 setting this device accepts",
            detail: detail)
    }

    /// For a client with pinned keys: one key of the verified chain must be pinned.
    private func checkPins() throws(TLSError) {
        guard case .client(_, let pins) = context.configuration.role, !pins.isEmpty else { return }
        guard let chain = SSL_get0_verified_chain(ssl) else {
            throw TLSError(
                .pinMismatch, "the chain \(serverName ?? "the server") showed could not be read for its pins")
        }
        for index in 0..<COpenSSL_sk_X509_num(chain) {
            guard let certificate = COpenSSL_sk_X509_value(chain, index),
                let key = X509_get_X509_PUBKEY(certificate)
            else { continue }
            var der: UnsafeMutablePointer<UInt8>?
            let length = i2d_X509_PUBKEY(key, &der)
            guard length > 0, let der else { continue }
            let spki = Data(bytes: der, count: Int(length))
            COpenSSL_free(der)
            let pin = Data(SHA256.hash(data: spki))
            if pins.contains(where: { safeCompare($0, pin) }) { return }
        }
        throw TLSError(
            .pinMismatch,
            "the key of \(serverName ?? "the server") is not the one this app was built to trust: the server changed "
                + "its key, or something is in between")
    }
}
