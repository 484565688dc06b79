import Foundation
import SiblingsCrypto

/// A sign-in request settled: answered on one sibling, or cancelled on the new device. It goes to the account's
/// discovery inbox, so that every other sibling dismisses the prompt it shows for that request (beyond the seed,
/// docs/pixie-protocol.md, "Differences from the seed"; Signal and WhatsApp take a linking prompt away once it
/// is answered).
///
///     offset  size  field
///     0       1     marker = 0x02 (a DiscoveryBox starts 0x01)
///     1       32    request: SHA-256 of the DiscoveryBox it settles
///     33      ...   a sign-in reply (SignInReplyChannel) of type signin_settled, payload: outcome (1)
///
/// It is sealed on the request's own reply channel, so only a party that could open the request can settle it:
/// the new device that made it, or a holder of the discovery key. The relay, which sees the request box go by,
/// cannot dismiss a prompt. The digest only says which prompt's channel to try; nothing is trusted from it.
public struct SignInSettlement: Sendable, Equatable {
    public static let marker: UInt8 = 0x02
    static let digestByteCount = 32

    public enum Outcome: UInt8, Sendable, Equatable, CustomStringConvertible {
        /// The new device gave up the request.
        case cancelled = 0
        /// Another sibling approved it.
        case approved = 1
        /// Another sibling rejected it.
        case rejected = 2

        public var description: String {
            switch self {
            case .cancelled: "cancelled on the new device"
            case .approved: "approved on another device"
            case .rejected: "rejected on another device"
            }
        }
    }

    /// SHA-256 of the request's DiscoveryBox.
    public let requestDigest: Data
    public let outcome: Outcome

    /// The digest that names a request: SHA-256 of its DiscoveryBox as sent.
    public static func digest(ofRequest box: some DataProtocol) -> Data { Data(SHA256.hash(data: Data(box))) }

    /// The request a frame on the discovery inbox settles, if the frame is a settlement at all (it is not yet
    /// authenticated: open it with that request's channel).
    public static func requestDigest(of frame: some DataProtocol) -> Data? {
        let bytes = Data(frame)
        guard bytes.count > 1 + digestByteCount, bytes[bytes.startIndex] == marker else { return nil }
        return bytes.dropFirst().prefix(digestByteCount)
    }

    /// The frame that settles the request `requestDigest` with `outcome`, sealed on its reply channel.
    static func seal(_ outcome: Outcome, requestDigest: Data, on replies: SignInReplyChannel) throws -> Data {
        guard requestDigest.count == digestByteCount else {
            throw PixieWireError(.malformed, "a settlement names its request by a 32-byte SHA-256")
        }
        return Data([marker]) + requestDigest + (try replies.seal(.signInSettled(outcome)))
    }

    /// Opens a settlement frame with the channel of the request it names; throws for anything else (another
    /// request's, a forgery, a frame that is not a settlement).
    static func open(
        _ frame: some DataProtocol, on replies: SignInReplyChannel
    ) throws(PixieWireError)
        -> SignInSettlement
    {
        guard let digest = requestDigest(of: frame) else {
            throw PixieWireError(.malformed, "not a sign-in settlement")
        }
        let (type, payload) = try replies.open(Data(frame).dropFirst(1 + digestByteCount))
        guard case .signInSettled(let outcome) = try SiblingMessage(type: type, payload: payload) else {
            throw PixieWireError(.malformed, "a \(type) frame where a settlement was expected")
        }
        return SignInSettlement(requestDigest: digest, outcome: outcome)
    }
}

extension SignInReplyChannel {
    /// The frame for the discovery inbox that settles the request whose box has digest `requestDigest`.
    public func settlement(_ outcome: SignInSettlement.Outcome, requestDigest: Data) throws -> Data {
        try SignInSettlement.seal(outcome, requestDigest: requestDigest, on: self)
    }

    /// Opens a settlement of the request this channel belongs to.
    public func openSettlement(_ frame: some DataProtocol) throws(PixieWireError) -> SignInSettlement {
        try SignInSettlement.open(frame, on: self)
    }
}
