import Foundation
import SiblingsCrypto

/// The MAC inside every sealed-sender envelope, under the channel key between sender and recipient
/// (000_e422bd9a7c930342.txt: "Every envelope between siblings carries a MAC ... under a sibling channel key").
///
///     inner_mac = HMAC-SHA256(channel key, "pixie/inner-mac/v1" ‖ 0x00 ‖ recipient subject (32)
///                             ‖ u16 length ‖ sender_cert ‖ payload type (1) ‖ u32 length ‖ payload)
///
/// It binds the frame to the inbox it was sent to, so a relay cannot deliver a sibling's frame to another inbox.
public enum InnerMAC {
    public static let byteCount = 32

    /// The key between the devices of one account: HKDF-SHA256 (RFC 5869) of the 32-byte account signing seed,
    /// empty salt, info "pixie/inner-mac/sibling-channel/v1". Only a device that holds the seed (one a sibling
    /// approved) can write or check a sibling frame.
    public static func siblingChannelKey(accountSeed: some DataProtocol) throws -> SymmetricKey {
        guard accountSeed.count == 32 else {
            throw PixieWireError(.malformed, "an account seed is 32 bytes, not \(accountSeed.count)")
        }
        return try HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: Data(accountSeed)), salt: Data(),
            info: Data("pixie/inner-mac/sibling-channel/v1".utf8), outputByteCount: 32)
    }

    static func message(recipient: RelaySubject, senderCert: Data, type: PayloadType, payload: Data) -> Data {
        var input = Data("pixie/inner-mac/v1\0".utf8)
        input += recipient.rawRepresentation
        input.appendUInt16(UInt16(truncatingIfNeeded: senderCert.count))
        input += senderCert
        input.append(type.rawValue)
        input.appendUInt32(UInt32(payload.count))
        input += payload
        return input
    }

    public static func compute(
        channelKey: SymmetricKey, recipient: RelaySubject, senderCert: Data, type: PayloadType, payload: Data
    ) -> Data {
        Data(
            HMAC<SHA256>.authenticationCode(
                for: message(recipient: recipient, senderCert: senderCert, type: type, payload: payload),
                using: channelKey))
    }
}
