import Foundation
import SiblingsCrypto

/// age v1 file encryption (C2SP age spec): encrypt to X25519, hybrid post-quantum or passphrase
/// recipients; decrypt with the matching identities. docs/age.md says what is accepted and refused.
public enum Age {
    static let binaryPrefix = Data("age-encryption.org/".utf8)

    // MARK: - In memory

    /// Encrypts `plaintext` to every recipient; `armor` writes the PEM-like ASCII armor.
    public static func encrypt(_ plaintext: Data, to recipients: [any AgeRecipient], armor: Bool = false) throws -> Data
    {
        var out = Data()
        try encrypt(reading: ByteInput(data: plaintext), to: recipients, armor: armor) { out.append(raw: $0) }
        return out
    }

    /// Decrypts an age file (binary or armored, detected) with the first identity that matches.
    public static func decrypt(_ file: Data, identities: [any AgeIdentity]) throws -> Data {
        var out = Data()
        try decrypt(file, identities: identities) { out.append($0) }
        return out
    }

    /// Decrypts `file`, passing each chunk of plaintext to `release` as soon as its tag verifies. When this
    /// throws `.payloadFailure`, what was released so far is authentic but the file is incomplete.
    public static func decrypt(
        _ file: Data, identities: [any AgeIdentity], releasing release: (Data) throws -> Void
    ) throws {
        try decrypt(reading: ByteInput(data: file), identities: identities) { try release(Data(raw: $0)) }
    }

    // MARK: - Streaming

    /// Encrypts everything `input` yields until its end into `output`, in constant memory.
    public static func encrypt(
        from input: FileHandle, to output: FileHandle, recipients: [any AgeRecipient], armor: Bool = false
    ) throws {
        try encrypt(reading: reader(input), to: recipients, armor: armor, write: writer(output))
    }

    /// Decrypts the age file `input` into `output`, in constant memory. Each 64 KiB chunk is written only
    /// after its tag verifies; a truncated or altered file throws (`.payloadFailure`) after the chunks before
    /// the damage were written, so delete the output when this throws.
    public static func decrypt(from input: FileHandle, to output: FileHandle, identities: [any AgeIdentity]) throws {
        try decrypt(reading: reader(input), identities: identities, release: writer(output))
    }

    static func reader(_ handle: FileHandle) -> ByteInput {
        ByteInput(
            { count in
                do {
                    return try handle.read(upToCount: count)
                } catch {
                    throw AgeError(.io, "cannot read the input: \(error.localizedDescription)")
                }
            },
            direct: { buffer in
                do {
                    return try FileDescriptorIO.read(handle.fileDescriptor, into: buffer)
                } catch {
                    throw AgeError(.io, "cannot read the input: \(error)")
                }
            })
    }

    static func writer(_ handle: FileHandle) -> AgeStream.Sink {
        { bytes in
            do {
                try FileDescriptorIO.write(handle.fileDescriptor, bytes)
            } catch {
                throw AgeError(.io, "cannot write the output: \(error); check free space")
            }
        }
    }

    // MARK: - The core

    static func encrypt(
        reading input: ByteInput, to recipients: [any AgeRecipient], armor: Bool, write: @escaping AgeStream.Sink
    ) throws {
        guard let labels = recipients.first?.labels else {
            throw AgeError(.incompatibleRecipients, "no recipients: give at least one recipient or a passphrase")
        }
        guard recipients.allSatisfy({ $0.labels == labels }) else {
            throw AgeError(
                .incompatibleRecipients,
                "these recipients cannot share a file: a passphrase must be the only recipient, and hybrid "
                    + "(age1pq1) recipients cannot be mixed with X25519 (age1) ones; encrypt separately")
        }
        let fileKey = StanzaCrypto.newFileKey()
        let stanzas = try recipients.flatMap { try $0.wrap(fileKey: fileKey) }
        var header = AgeHeader.encode(stanzas)
        header +=
            Data(" ".utf8)
            + Data(StrictBase64.encodeUnpadded(try AgeHeader.mac(fileKey: fileKey, authenticatedBytes: header)).utf8)
        header += Data("\n".utf8)

        let armorEncoder = armor ? try AgeArmor.Encoder { data in try data.withUnsafeBytes { try write($0) } } : nil
        let emit: AgeStream.Sink = armorEncoder.map { encoder in { try encoder.write(Data(raw: $0)) } } ?? write
        let nonce = SecureRandom.bytes(count: AgeStream.nonceSize)
        try (header + nonce).withUnsafeBytes { try emit($0) }
        try AgeStream.seal(from: input, key: try AgeStream.payloadKey(fileKey: fileKey, nonce: nonce), write: emit)
        try armorEncoder?.finish()
    }

    static func decrypt(
        reading raw: ByteInput, identities: [any AgeIdentity], release: AgeStream.Sink
    ) throws {
        let prefix = try raw.peek(binaryPrefix.count)
        let input: ByteInput
        if prefix.isEmpty || prefix == binaryPrefix {
            input = raw
        } else {
            let decoder = AgeArmor.Decoder(raw)
            input = ByteInput(decoder.read)
        }
        let header = try AgeHeader.parse(input)
        if header.stanzas.contains(where: { $0.type == "scrypt" }), header.stanzas.count != 1 {
            throw AgeError.header("a scrypt stanza is not the only stanza in the header")
        }
        var fileKey: SymmetricKey?
        for identity in identities {
            if let key = try identity.unwrap(stanzas: header.stanzas) {
                fileKey = key
                break
            }
        }
        guard let fileKey else {
            throw AgeError(
                .noMatchingIdentity,
                "none of the \(identities.count) identities opens any of the file's \(header.stanzas.count) stanzas "
                    + "(\(Set(header.stanzas.map(\.type)).sorted().joined(separator: ", "))): "
                    + "use the key or passphrase the file was encrypted to")
        }
        let mac = try AgeHeader.mac(fileKey: fileKey, authenticatedBytes: header.authenticatedBytes)
        guard safeCompare(mac, header.mac) else {
            throw AgeError(
                .headerMACFailure, "the header MAC does not match: the header was altered after encryption")
        }
        let nonce = try input.read(AgeStream.nonceSize)
        guard nonce.count == AgeStream.nonceSize else {
            throw AgeError.header("the file ends within the 16-byte payload nonce after the header")
        }
        try AgeStream.open(
            from: input, key: try AgeStream.payloadKey(fileKey: fileKey, nonce: nonce), release: release)
    }
}

extension Data {
    /// A copy of `bytes`.
    init(raw bytes: UnsafeRawBufferPointer) {
        if let base = bytes.baseAddress, bytes.count > 0 {
            self.init(bytes: base, count: bytes.count)
        } else {
            self.init()
        }
    }

    /// Appends a copy of `bytes`.
    mutating func append(raw bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        append(base.assumingMemoryBound(to: UInt8.self), count: bytes.count)
    }
}
