import Foundation
import SiblingsCrypto
import Testing

@Suite("Keys, randomness and comparison")
struct SymmetricKeyTests {
    @Test("random keys have the asked size and differ")
    func randomKeys() {
        let a = SymmetricKey(size: .bits256)
        let b = SymmetricKey(size: .bits256)
        #expect(a.bitCount == 256 && a != b)
        #expect(SymmetricKey(data: a.withUnsafeBytes { Data($0) }) == a)
    }

    @Test("safeCompare compares contents and lengths")
    func compare() {
        #expect(safeCompare(Data([1, 2, 3]), Data([1, 2, 3])))
        #expect(!safeCompare(Data([1, 2, 3]), Data([1, 2, 4])))
        #expect(!safeCompare(Data([1, 2, 3]), Data([1, 2])))
        #expect(safeCompare(Data(), Data()))
    }

    @Test("hex decoding refuses odd lengths and non-hex characters")
    func hex() throws {
        #expect(try Data(hexString: "00ffA0") == Data([0, 255, 160]))
        #expect(Data([0, 255, 160]).hexString == "00ffa0")
        expectCryptoError(.invalidEncoding) { try Data(hexString: "abc") }
        expectCryptoError(.invalidEncoding) { try Data(hexString: "zz") }
    }
}
