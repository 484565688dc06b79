import Foundation
import PixieWire
import SiblingsCrypto

/// One sign-in request of a new device (000_e422bd9a7c930342.txt, SignInApprovalRequester): the sealed request
/// for the account's discovery inbox, the reply subject to listen on first, the check code to show, and the
/// reading of what comes back.
public struct SignInAttempt: Sendable {
    public let request: SignInRequest
    /// The DiscoveryBox to SEND to the account's discovery inbox (wake class ``WakeClass/silent``).
    public let box: Data
    /// The reply subject's key: SUBSCRIBE it before sending the box, "so a fast acknowledgement cannot arrive
    /// before anyone is listening".
    public let replySubjectKey: RelaySubjectKey
    private let replies: SignInReplyChannel

    /// The eight digits to show, which the person types on the sibling before Approve.
    public var checkCode: String { replies.checkCode }

    /// A request from this device (`deviceModel`, its X-Wing `sealingKey`, its verified `phoneCert`) to the
    /// account whose discovery key is `discoveryKey` (verified against the log by the caller first).
    public init(
        deviceModel: String, phoneCert: Data, sealingKey: XWing.PublicKey, discoveryKey: XWing.PublicKey, now: Date
    ) throws {
        let replySubjectKey = RelaySubjectKey()
        let request = SignInRequest(
            deviceModel: deviceModel, replySubject: replySubjectKey.subject, sealingKey: sealingKey, timestamp: now)
        let (box, replies) = try DiscoveryBox(phoneCert: phoneCert, message: .signInRequest(request))
            .sealed(to: discoveryKey)
        self.request = request
        self.box = box
        self.replySubjectKey = replySubjectKey
        self.replies = replies
    }

    /// The frame for the account's discovery inbox that cancels this request: every sibling showing its prompt
    /// dismisses it (only this device, or a holder of the discovery key, can make it).
    public func cancellation() throws -> Data {
        try replies.settlement(.cancelled, requestDigest: SignInSettlement.digest(ofRequest: box))
    }

    /// What a sibling said.
    public enum Answer: Sendable, Equatable {
        /// A sibling passed the request to its person: "Approve on your <family>".
        case acknowledged(deviceFamily: String)
        case approved(SignInApproval.Approved)
        case rejected
    }

    /// Reads a frame delivered on the reply subject. Anything not sealed on this request's channel (a forgery,
    /// another request's reply) throws, and the caller drops it and keeps waiting.
    public func read(_ reply: some DataProtocol) throws(PixieWireError) -> Answer {
        let (type, payload) = try replies.open(reply)
        switch try SiblingMessage(type: type, payload: payload) {
        case .signInAck(let ack): return .acknowledged(deviceFamily: ack.deviceFamily)
        case .signInApproval(.approved(let approved)): return .approved(approved)
        case .signInApproval(.rejected): return .rejected
        default: throw PixieWireError(.malformed, "a \(type) frame on a sign-in reply subject")
        }
    }

    /// The account signing key from an approval's seed, once it derives `loggedAccountKey`, the key the
    /// transparency log holds under `account/<kt_handle>` (verified by the caller). Adopt it before redeeming the
    /// grant, so the first sibling frames can be MAC'd. A seed for another key throws
    /// ``SignInError/seedDoesNotMatchTheLog``.
    public static func accountKey(
        from approved: SignInApproval.Approved, loggedAccountKey: some DataProtocol
    ) throws -> HybridSignature.PrivateKey {
        let key = try HybridSignature.PrivateKey(seedRepresentation: approved.accountSeed)
        guard safeCompare(key.publicKey.rawRepresentation, Data(loggedAccountKey)) else {
            throw SignInError.seedDoesNotMatchTheLog
        }
        return key
    }
}
