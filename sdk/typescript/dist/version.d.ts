export declare const SDK_NAME = "@berth/sdk";
export declare const SDK_VERSION = "0.1.0";
